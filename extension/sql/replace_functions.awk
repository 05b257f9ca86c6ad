# From an install script, the statements an update script needs so that an
# existing installation ends up with the same functions as a fresh one: every
# PL/Python and PL/pgSQL function as CREATE OR REPLACE (a PL/Python body
# imports the Python code of this version), the C function <name> in front
# of each PL/Python body <name>_python (which comes first), the privileges
# revoked from those bodies, and every COMMENT ON FUNCTION.  Other C functions
# are left out: their bodies name only the shared library.
BEGIN { state = "outside" }
state == "outside" && /^REVOKE ALL ON FUNCTION / {
	printf "%s\n\n", $0
	next
}
state == "outside" && /^CREATE FUNCTION / {
	block = $0 "\n"; state = "header"
	name = $3; sub(/\(.*/, "", name)
	if (name ~ /_python$/) { face = name; sub(/_python$/, "", face); has_body[face] = 1 }
	next
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
	if ($0 ~ /AS \$python\$$/) { state = "body"; ending = "$python$;" }
	else if ($0 ~ /AS \$plpgsql\$$/) { state = "body"; ending = "$plpgsql$;" }
	else if ($0 ~ /;$/) {
		if (name in has_body) {
			sub(/^CREATE FUNCTION /, "CREATE OR REPLACE FUNCTION ", block)
			printf "%s\n", block
		}
		state = "outside"
	}
	next
}
state == "body" {
	block = block $0 "\n"
	if ($0 == ending) {
		sub(/^CREATE FUNCTION /, "CREATE OR REPLACE FUNCTION ", block)
		printf "%s\n", block
		state = "outside"
	}
	next
}
