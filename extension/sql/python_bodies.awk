# The PL/Python body of each C function that calls one, made from the C
# function's own declaration, so that sql/nearsim.sql declares such a
# function once.  A C function calls the body <name>_python when it is
# declared AS 'MODULE_PATHNAME', 'nearsim_python_call' (src/python_call.c),
# or when the line "-- with a PL/Python body" precedes its declaration (a C
# function that answers some calls itself).  The body takes the same
# arguments and returns the same type, has the same volatility, strictness
# and parallel safety, runs with search_path pinned, and calls
# nearsim.server.functions.<name> with plpy and its arguments; EXECUTE on it
# is revoked from PUBLIC.  It is written just before the C function, with
# the types of the C function's COMMENT ON FUNCTION line.  Everything else
# is copied as it is.
BEGIN { state = "outside"; marked = 0 }

function argument_names(declaration,    open, depth, quoted, i, c, current, names, argument) {
	open = index(declaration, "(")
	depth = 0; quoted = 0; current = ""; names = ""
	for (i = open + 1; i <= length(declaration); i++) {
		c = substr(declaration, i, 1)
		if (quoted) { if (c == "'") quoted = 0; current = current c; continue }
		if (c == "'") { quoted = 1; current = current c; continue }
		if (c == "(") depth++
		if (c == ")" && depth == 0) { names = add_name(names, current); break }
		if (c == ")") depth--
		if (c == "," && depth == 0) { names = add_name(names, current); current = ""; continue }
		current = current c
	}
	return names
}

function add_name(names, argument,    words) {
	gsub(/^[ \t\n]+/, "", argument)
	if (argument == "" || argument ~ /^OUT[ \t]/) return names
	sub(/^(IN|INOUT)[ \t]+/, "", argument)
	split(argument, words, /[ \t\n]+/)
	return names ", " words[1]
}

function write_body(face, types,    lines, count, i, line, name, header) {
	name = face; sub(/^CREATE FUNCTION /, "", name); sub(/\(.*/, "", name)
	count = split(face, lines, "\n")
	header = ""
	for (i = 1; i <= count; i++) {
		line = lines[i]
		if (line == "" || line ~ /^\tAS 'MODULE_PATHNAME'/ || line ~ /^\tSET search_path/) continue
		if (i == 1) sub("^CREATE FUNCTION " name "\\(", "CREATE FUNCTION " name "_python(", line)
		sub(/LANGUAGE C/, "LANGUAGE plpython3u", line)
		sub(/;$/, "", line)
		header = header line "\n"
	}
	printf "%s", header
	printf "\tSET search_path = pg_catalog, pg_temp\n\tAS $python$\n#NEARSIM-IMPORT\n"
	printf "return functions.%s(plpy%s)\n$python$;\n\n", name, argument_names(face)
	printf "REVOKE ALL ON FUNCTION %s_python(%s) FROM PUBLIC;\n\n", name, types
	printf "COMMENT ON FUNCTION %s_python(%s) IS\n", name, types
	printf "'the PL/Python body of %s(%s), which calls it and reports its errors without a Python traceback';\n\n", name, types
}

state == "outside" && $0 == "-- with a PL/Python body" { marked = 1; next }
state == "outside" && /^CREATE FUNCTION / {
	face = $0 "\n"; state = "declaration"; with_body = marked; marked = 0
	next
}
state == "outside" { print; next }
state == "declaration" {
	face = face $0 "\n"
	if ($0 ~ /AS \$(python|plpgsql)\$$/) { ending = $0; sub(/.*AS /, "", ending); ending = ending ";"; state = "quoted"; next }
	if ($0 ~ /;$/) {
		if (face ~ /'nearsim_python_call'/ || with_body) { between = ""; state = "comment" }
		else { printf "%s", face; state = "outside" }
	}
	next
}
state == "quoted" {
	face = face $0 "\n"
	if ($0 == ending) { printf "%s", face; state = "outside" }
	next
}
state == "comment" {
	if ($0 ~ /^COMMENT ON FUNCTION /) {
		types = $0; sub(/^COMMENT ON FUNCTION [a-z_0-9]+\(/, "", types); sub(/\) IS$/, "", types)
		write_body(face, types)
		printf "%s%s", face, between
		print
		state = "outside"
	} else between = between $0 "\n"
	next
}
END { if (state != "outside") { print "python_bodies.awk: unterminated declaration" > "/dev/stderr"; exit 1 } }
