# calls.awk - what each function of common/ uses, for tests/grader/check:
# a line "function name" for every name a function's body uses (a call, or
# a function taken as a value); comments and strings are left out. A
# function starts at a column-0 line that names it before "(" and does not
# end in ";", and its body runs from a column-0 "{" to a column-0 "}", as
# every file of common/ is written.
#
# A macro that only supplies its caller's name to a function, such as
# error.h's
#     #define die(...) die_in(__func__, __VA_ARGS__)
# makes the two names one function: a line each way, so that refusing
# either refuses both (a call to the macro is a call to die_in in the
# object, and common/'s source names the macro). Headers are read for
# these lines alone.
match($0, /^#define [A-Za-z_][A-Za-z0-9_]*\([^)]*\)[ \t]+[A-Za-z_][A-Za-z0-9_]*\(/) {
    macro = substr($0, 9, RLENGTH - 9)
    target = macro
    sub(/\(.*$/, "", macro)
    sub(/^.*[ \t]/, "", target)
    print macro, target
    print target, macro
    next
}
FILENAME ~ /\.h$/ { next }
{
    line = $0
    if (in_comment) {
        if (!sub(/^.*\*\//, "", line)) next
        in_comment = 0
    }
    gsub(/\/\*([^*]|\*+[^*\/])*\*+\//, "", line)
    if (sub(/\/\*.*$/, "", line)) in_comment = 1
    sub(/\/\/.*$/, "", line)
    gsub(/"([^"\\]|\\.)*"/, "\"\"", line)
    gsub(/'([^'\\]|\\.)*'/, "0", line)
}
line ~ /^[A-Za-z_]/ && line !~ /;[ \t]*$/ && line !~ /^(typedef|struct|enum|union|#)/ &&
    match(line, /[A-Za-z_][A-Za-z0-9_]*\(/) {
    pending = substr(line, RSTART, RLENGTH - 1)
}
line ~ /^\{/ { if (pending != "") { current = pending; pending = "" } ; next }
line ~ /^\}/ { current = ""; next }
current != "" {
    while (match(line, /[A-Za-z_][A-Za-z0-9_]*/)) {
        print current, substr(line, RSTART, RLENGTH)
        line = substr(line, RSTART + RLENGTH)
    }
}
