# From an install script, the statements an update script needs so that an
# existing installation ends up with the same functions as a fresh one: every
# PL/Python function as CREATE OR REPLACE (its body imports the Python code of
# this version), and every COMMENT ON FUNCTION.  C and PL/pgSQL functions are
# left out: their bodies do not depend on the version.
BEGIN { state = "outside" }
state == "outside" && /^CREATE FUNCTION / {
	block = $0 "\n"; state = "header"; next
}
state == "outside" && /^COMMENT ON FUNCTION / {
	block = $0 "\n"; state = "comment"
	if ($0 ~ /';$/) { printf "%s\n", block; state = "outside" }
	next
}
state == "comment" {
	block = block $0 "\n"
	if ($0 ~ /';$/) { printf "%s\n", block; state = "outside" }
	next
}
state == "header" {
	block = block $0 "\n"
	if ($0 ~ /AS \$python\$$/) state = "python"
	else if ($0 ~ /AS \$plpgsql\$$/) state = "skip"
	else if ($0 ~ /;$/) state = "outside"
	next
}
state == "python" {
	block = block $0 "\n"
	if ($0 == "$python$;") {
		sub(/^CREATE FUNCTION /, "CREATE OR REPLACE FUNCTION ", block)
		printf "%s\n", block
		state = "outside"
	}
	next
}
state == "skip" {
	if ($0 == "$plpgsql$;") state = "outside"
	next
}
