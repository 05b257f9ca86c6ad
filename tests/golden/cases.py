"""The texts of the golden vectors, and how long texts are generated.

A case is ``{"name": ..., "text": ...}`` or, for texts too long to commit,
``{"name": ..., "recipe": {...}}`` expanded by :func:`expand`.  Recipes use
only string operations and xxh64, so they expand identically everywhere.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any

import xxhash

BASE: dict[str, str] = {
    # ASCII
    "ascii-genesis": "In the beginning God created the heaven and the earth.",
    "ascii-psalm14": "The fool hath said in his heart, There is no God. They are corrupt, "
    "they have done abominable works, there is none that doeth good.",
    "ascii-psalm53": "The fool hath said in his heart, There is no God. Corrupt are they, "
    "and have done abominable iniquity: there is none that doeth good.",
    "ascii-pangram": "The quick brown fox jumps over the lazy dog",
    "ascii-seed003": "Similar documents are those which share essentially the same words "
    "in the same sequence (syntactic similarity).",
    "ascii-code": "def simhash(text): return sum(1 << i for i in range(64)) # comment",
    "ascii-sql": "SELECT * FROM docs WHERE hamming(si, simhash($1)) <= 6;",
    "ascii-numbers": "Version 2.0 of 13,620 files (343 MB) in 160 sec at 3.3 MB/s",
    "ascii-underscore": "snake_case_name and __dunder__ and _private stay whole",
    "ascii-apostrophes": "Don't you think it's the author's and the authors' choice?",
    "ascii-hyphens": "state-of-the-art near-duplicate e-mail re-use",
    "ascii-email": "Reply to john.doe@example.com about https://example.org/a/b?c=d",
    "ascii-repeated": "spam spam spam spam spam spam spam spam",
    "ascii-repeated-shingle": "a b c a b c a b c a b c",
    "ascii-digits": "1 22 333 4444 55555 666666",
    "ascii-control": "bell\x07tab\tvertical\x0bform\x0cfeed\x01end",
    "ascii-mixed-case": "MiXeD CaSe WoRdS In A sEnTeNcE",
    "ascii-constitution": "We the People of the United States, in Order to form a more "
    "perfect Union, establish Justice, insure domestic Tranquility",
    # accented Latin
    "latin-french": "L'été dernier, nous sommes allés à la plage près de Nîmes.",
    "latin-german": "Die Straße führt über die Brücke zum Schloß; GROSSE STRASSE",
    "latin-german-capital-eszett": "ẞ ist der große Buchstabe von ß",
    "latin-spanish": "¿Dónde está el niño? ¡Mañana será otro día!",
    "latin-polish": "Zażółć gęślą jaźń, pchnąć w tę łódź jeża",
    "latin-czech": "Příliš žluťoučký kůň úpěl ďábelské ódy",
    "latin-vietnamese": "Tiếng Việt có dấu: người, được, những, nhưng",
    "latin-turkish": "İstanbul'da ılık bir gün; DİYARBAKIR ve ISPARTA",
    "latin-icelandic": "Þórður og Ægir fóru í ferð með Ðóru",
    "latin-nordic": "Ærø, Øresund og Åland: blåbærsyltetøy",
    "latin-nfd": unicodedata.normalize("NFD", "Crème brûlée à la française, déjà vu"),
    "latin-nfc": unicodedata.normalize("NFC", "Crème brûlée à la française, déjà vu"),
    # Greek
    "greek": "Ἐν ἀρχῇ ἦν ὁ λόγος, καὶ ὁ λόγος ἦν πρὸς τὸν θεόν",
    "greek-modern": "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο",
    "greek-sigma": "ΟΔΥΣΣΕΥΣ Ὀδυσσεύς οδυσσευς ΣΊΣΥΦΟΣ σίσυφος",
    # Cyrillic
    "cyrillic-russian": "В начале сотворил Бог небо и землю. Земля же была безвидна и пуста",
    "cyrillic-ukrainian": "Їжак з'їв ґудзик і щастя є у кожному",
    "cyrillic-serbian": "Љубав њега џак ђак ћирилица",
    "cyrillic-upper": "ВСЕ БУКВЫ ЗАГЛАВНЫЕ ЁЖИК",
    # CJK and other scripts without spaces
    "cjk-chinese": "起初神创造天地。地是空虚混沌，渊面黑暗；神的灵运行在水面上。",
    "cjk-chinese-traditional": "起初神創造天地。地是空虛混沌，淵面黑暗",
    "cjk-japanese": "東京タワーへ行きました。とても高かったです。",
    "cjk-japanese-halfwidth": "ｶﾀｶﾅ と ﾊﾝｶｸ の もじ",
    "cjk-korean": "태초에 하나님이 천지를 창조하시니라",
    "cjk-korean-jamo": unicodedata.normalize("NFD", "한국어 텍스트 정규화"),
    "cjk-extension-b": "𠀀𠀁𠀂 𪜀 𫝀 and 㐀㐁",
    "cjk-compatibility": "豈更車 ㍻ ㌔ ㎏ ㈱",
    "thai": "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ แต่มีระหว่างประโยค",
    # letters that tokenisation 2 cuts one to a token, with their marks
    "khmer": "ព្រះរាជាណាចក្រកម្ពុជា ជាតិ សាសនា ព្រះមហាក្សត្រ",
    "khmer-zero-width-spaces": "ព្រះរាជាណាចក្រ\u200bកម្ពុជា\u200bជាតិ\u200bសាសនា",
    "khmer-digits": "ឆ្នាំ ២០២៦ ខែ ១១ និង 2026",
    "lao": "ສາທາລະນະລັດ ປະຊາທິປະໄຕ ປະຊາຊົນລາວ",
    "myanmar": "မြန်မာနိုင်ငံသည် အရှေ့တောင်အာရှတွင် တည်ရှိသည်။",
    "tai-tham": "\u1a20\u1a60\u1a3e\u1a63\u1a26\u1a6e \u1a2f\u1a65\u1a45",
    "thai-sara-am": "น้ำใจไมตรี กำลังใจ ทำงาน",
    "thai-mixed": "Thaiภาษาไทยmixed123ภาษา๑๒๓ไทย_snake",
    "thai-marks-alone": "\u0e31\u0e34 leading marks, a\u0e31 after a Latin letter",
    "thai-latin-mark": "ก\u0301ข\u0301\u0302ค",
    "devanagari": "नमस्ते दुनिया, यह एक परीक्षण वाक्य है",
    "tamil": "யாமறிந்த மொழிகளிலே தமிழ்மொழி போல் இனிதாவது எங்கும் காணோம்",
    # right-to-left
    "arabic": "في البدء خلق الله السماوات والأرض",
    "arabic-tashkeel": "فِي ٱلْبَدْءِ خَلَقَ ٱللَّهُ ٱلسَّمَاوَاتِ وَٱلْأَرْضَ",
    "arabic-presentation-forms": "ﻻ ﷲ ﺍﻟﻌﺮﺑﻴﺔ",
    "arabic-digits": "العدد ١٢٣ و ٤٥٦",
    "hebrew": "בראשית ברא אלהים את השמים ואת הארץ",
    "hebrew-niqqud": "בְּרֵאשִׁית בָּרָא אֱלֹהִים אֵת הַשָּׁמַיִם וְאֵת הָאָרֶץ",
    "mixed-bidi": "The word שלום means peace and سلام too",
    # emoji
    "emoji-only": "😀😃😄😁 🎉🎉",
    "emoji-between-words": "I ❤️ New York 🗽 and 🍕 pizza",
    "emoji-zwj": "family 👨‍👩‍👧‍👦 and flag 🇩🇪 and skin 👍🏽 tone",
    "emoji-keycap": "press 1️⃣ then #️⃣ then *️⃣",
    # combining marks
    "combining-acute": "cafe\u0301 re\u0301sume\u0301 nai\u0308ve",
    "combining-precomposed": "café résumé naïve",
    "combining-stacked": "Z\u0351\u0364\u0300a\u036b\u0343l\u0352g\u0350o text",
    "combining-leading": "\u0301starts with a mark",
    "combining-enclosing": "A\u20dd B\u20de C\u20df",
    # compatibility characters
    "compat-ligatures": "ﬁne ﬂour ﬀ ﬃ ﬄ ﬅ ﬆ",
    "compat-fullwidth": "ＦＵＬＬ ｗｉｄｔｈ ＡＳＣＩＩ １２３",
    "compat-super-sub": "x² + y³ = z⁴ and H₂O",
    "compat-circled": "① ② ⓐ ⓑ Ⓐ",
    "compat-roman": "Ⅻ ⅻ Ⅳ chapter",
    "compat-fractions": "½ cup and ¾ teaspoon",
    "compat-math-letters": "𝐁𝐨𝐥𝐝 𝑰𝒕𝒂𝒍𝒊𝒄 𝔉𝔯𝔞𝔨𝔱𝔲𝔯",
    "compat-units": "㎞ ㏄ ㎡ ℃ ℉ №",
    "compat-kelvin-angstrom": "\u212a elvin \u212b ngstrom",
    # whitespace and line endings
    "ws-crlf": "line one\r\nline two\r\nline three\r\n",
    "ws-cr": "line one\rline two\rline three\r",
    "ws-lf": "line one\nline two\nline three\n",
    "ws-tabs": "\tindented\t\twith\ttabs\t",
    "ws-nbsp": "non\u00a0breaking\u00a0spaces\u00a0here",
    "ws-unicode-spaces": "em\u2003space thin\u2009space ideographic\u3000space",
    "ws-line-separators": "para\u2029graph line\u2028break next\u0085line",
    "ws-zero-width": "zero\u200bwidth\u200cnon\u200djoiner\ufeffbom",
    "ws-soft-hyphen": "co\u00adoperate hy\u00adphen\u00adation",
    "ws-leading-trailing": "   \n\t padded words here \n\n  ",
    # degenerate
    "empty": "",
    "space": " ",
    "whitespace-only": " \t\r\n\u3000\u00a0",
    "punctuation-only": "!!! ... ??? --- ;;; ()",
    "punctuation-unicode": "« » “ ” ‘ ’ — – … ¡ ¿ 、 。 ・",
    "symbols-only": "+ = < > | ~ ^ ` $ € £ ¥ © ®",
    "one-word": "hello",
    "one-word-upper": "HELLO",
    "one-letter": "a",
    "two-words": "hello world",
    "three-words": "hello wide world",
    "four-words": "hello wide wide world",
    "one-cjk-char": "字",
    "one-digit": "7",
    # Unicode versions: characters unassigned in Unicode 14.0.0
    "unassigned-cjk-ext-h": "before\U00031350after 𱍐 word",
    "unassigned-emoji-15": "wireless \U0001F6DC signal",
    "unassigned-kawi": "kawi \U00011F04\U00011F05 script",
    "unassigned-plain": "gap\u0378in greek",
    "private-use": "private\ue000use\U000F0000area",
    "noncharacters": "non\ufffecharacter\uffffcode",
    # paragraphs for stop words, stemmers and language detection
    "lang-english": "The runners were running quickly through the gardens, and the gardeners "
    "watched them run past the flowering hedges while talking about their connections.",
    "lang-german": "Die Läufer liefen schnell durch die Gärten, und die Gärtner sahen ihnen zu, "
    "während sie über die blühenden Hecken und ihre Verbindungen sprachen.",
    "lang-french": "Les coureurs couraient rapidement dans les jardins, et les jardiniers les "
    "regardaient passer devant les haies fleuries en parlant de leurs relations.",
    "lang-spanish": "Los corredores corrían rápidamente por los jardines, y los jardineros los "
    "miraban pasar junto a los setos floridos mientras hablaban de sus conexiones.",
    "lang-russian": "Бегуны быстро бежали через сады, а садовники смотрели, как они пробегают "
    "мимо цветущих изгородей, и говорили о своих связях.",
    "lang-greek": "Οι δρομείς έτρεχαν γρήγορα μέσα από τους κήπους και οι κηπουροί τους "
    "έβλεπαν να περνούν δίπλα από τους ανθισμένους φράχτες.",
    "lang-mixed": "The gardens are open. Les jardins sont ouverts. Die Gärten sind offen.",
}

# Variations of a few texts, so small changes are frozen as well.
VARIED = ["ascii-genesis", "ascii-psalm14", "latin-french", "cyrillic-russian", "greek"]
VARIANTS = {
    "upper": str.upper,
    "lower": str.lower,
    "title": str.title,
    "crlf": lambda t: t.replace(" ", "\r\n"),
    "double-space": lambda t: t.replace(" ", "  "),
    "nbsp": lambda t: t.replace(" ", "\u00a0"),
    "nfd": lambda t: unicodedata.normalize("NFD", t),
    "nfkd": lambda t: unicodedata.normalize("NFKD", t),
    "no-punctuation": lambda t: "".join(c for c in t if c.isalnum() or c.isspace()),
    "fullwidth": lambda t: "".join(
        chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in t
    ),
    "repeated": lambda t: (t + " ") * 3,
    "first-word-dropped": lambda t: t.split(" ", 1)[1],
    "last-word-dropped": lambda t: t.rsplit(" ", 1)[0],
    "word-inserted": lambda t: t.replace(" ", " inserted ", 1),
    "words-swapped": lambda t: " ".join([t.split(" ")[1], t.split(" ")[0], *t.split(" ")[2:]]),
    "prefix-tab": lambda t: "\t" + t,
    "suffix-newline": lambda t: t + "\n",
    "emoji-separated": lambda t: t.replace(" ", "🙂"),
    "underscore-joined": lambda t: t.replace(" ", "_"),
    "soft-hyphens": lambda t: t.replace("e", "e\u00ad"),
    "zero-width-spaces": lambda t: t.replace(" ", "\u200b"),
    "ligature-fi": lambda t: t.replace("fi", "ﬁ").replace("th", "th"),
}

WORDS = tuple(
    "the and of to in that he shall unto for i his a lord they be is him not them it "
    "with all thou thy was god which my me said but ye their have thee from as are "
    "when this out were by you up there hath then people came had house into on her".split()
)

RECIPES: dict[str, dict[str, Any]] = {
    # about 1.2 MB of pseudo-random words (many pieces, ASCII fast path)
    "long-words-1mb": {"kind": "words", "seed": 1, "count": 240_000},
    # a paragraph in several scripts repeated past 1 MB (pieces cut in non-ASCII text)
    "long-multiscript-1mb": {
        "kind": "repeat",
        "unit": "Crème brûlée ΣΊΣΥΦΟΣ Straße 東京タワーへ行く ﬁne ＦＵＬＬ "
        "في البدء خلق الله 👍🏽 nai\u0308ve\r\n",
        "times": 16_000,
    },
    # 1.2 MB of ideographs with no whitespace at all (one piece)
    "long-cjk-no-spaces": {
        "kind": "repeat",
        "unit": "起初神创造天地地是空虚混沌渊面黑暗",
        "times": 25_000,
    },
    # 1.1 MB of Khmer without spaces (pieces cut inside letters and their marks)
    "long-khmer-no-spaces": {
        "kind": "repeat",
        "unit": "ព្រះរាជាណាចក្រកម្ពុជាជាតិសាសនា",
        "times": 12_500,
    },
    # one 1 MB word
    "long-single-word": {"kind": "repeat", "unit": "abcdefghij", "times": 110_000},
    # lines of words separated by newlines only
    "long-lines-1mb": {"kind": "words", "seed": 7, "count": 250_000, "separator": "\n"},
}


def expand(case: dict[str, Any]) -> str:
    """The text of a golden case."""
    if "text" in case:
        return str(case["text"])
    recipe = case["recipe"]
    if recipe["kind"] == "repeat":
        return str(recipe["unit"]) * int(recipe["times"])
    if recipe["kind"] == "words":
        seed = recipe["seed"]
        separator = recipe.get("separator", " ")
        return separator.join(
            WORDS[xxhash.xxh64_intdigest(f"{seed}:{i}".encode()) % len(WORDS)]
            for i in range(recipe["count"])
        )
    raise ValueError(f"unknown recipe {recipe!r}")


def _cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = [{"name": n, "text": t} for n, t in BASE.items()]
    for base in VARIED:
        for variant, change in VARIANTS.items():
            cases.append({"name": f"{base}+{variant}", "text": change(BASE[base])})
    cases += [{"name": n, "recipe": r} for n, r in RECIPES.items()]
    names = [c["name"] for c in cases]
    assert len(names) == len(set(names)), "duplicate golden case names"
    return cases


CASES = _cases()

# Profiles frozen by golden vectors besides the default: every short name and
# each option at least once.
GOLDEN_PROFILES = (
    "default/1",
    "english/1",
    "auto/1",
    "soundex/1",
    "chars/1",
    "set/1",
    "words:1-3/1",
    "chars:3-6+unique/1",
    "words:2+novowels+unique-words/1",
    "words:3+stop:french+stem:french/1",
    "words:1+stem:german/1",
    "words:4+stop:auto/1",
    "default/2",
    "english/2",
    "chars:3-6+unique/2",
)
GOLDEN_DIR = Path(__file__).resolve().parent


def golden_path(profile: str) -> Path:
    """The golden vector file of ``profile`` (a canonical name)."""
    slug = re.sub(r"[^a-z0-9]+", "-", profile.lower()).strip("-")
    return GOLDEN_DIR / f"simhash-{slug}.jsonl"
