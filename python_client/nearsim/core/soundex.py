"""American Soundex: seed 000's Soundex token stream, and the ``soundex`` profile option."""

from __future__ import annotations

# American Soundex digit classes (the U.S. National Archives' rules).
_SOUNDEX_CODES = {
    **dict.fromkeys("BFPV", "1"),
    **dict.fromkeys("CGJKQSXZ", "2"),
    **dict.fromkeys("DT", "3"),
    "L": "4",
    **dict.fromkeys("MN", "5"),
    "R": "6",
}


def soundex(word: str) -> str:
    """The American Soundex code of ``word`` (letter + three digits), "" if it has no letter.

    Seed 000 cites Soundex without naming a variant; this is the American
    (National Archives) Soundex: only the ASCII letters A-Z count (case is
    ignored, other characters are skipped); the first letter is kept; B F P V
    = 1, C G J K Q S X Z = 2, D T = 3, L = 4, M N = 5, R = 6; letters with the
    same digit next to each other, or separated only by H or W, are coded
    once, also when the first letter is one of them (Pfister = P236); a vowel
    (A E I O U Y) separates them (Tymczak = T522); the code is cut or padded
    with zeros to four characters.  No library in nearsim's environment
    provides it, and the algorithm is a few lines.
    """
    letters = [c for c in word.upper() if "A" <= c <= "Z"]
    if not letters:
        return ""
    digits: list[str] = []
    previous = _SOUNDEX_CODES.get(letters[0], "")
    for letter in letters[1:]:
        code = _SOUNDEX_CODES.get(letter)
        if code is not None:
            if code != previous:
                digits.append(code)
                if len(digits) == 3:
                    break
            previous = code
        elif letter not in "HW":  # a vowel (or Y) separates equal codes
            previous = ""
    return (letters[0] + "".join(digits)).ljust(4, "0")
