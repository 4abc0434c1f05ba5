# stubs.awk - both ends of every exercise's call, from its one declaration
# in tests/grader/exercises_0N.h (so that the two cannot disagree):
#
#   awk -f tests/grader/judge/stubs.awk tests/grader/exercises_0*.h > stubs.c
#
# Compiled with -DJUDGE, stubs.c defines each my_NAME for the judge: it
# sends the arguments to the runner and returns what comes back. Compiled
# with -DRUN_NAME, it defines the runner's runner_call for exercise NAME:
# it takes the arguments, calls the learner's my_NAME, and sends the
# results. Each parameter's type says how it travels (a kind, sides.h); a
# pointer into memory no case registered travels as COUNT elements, COUNT
# an expression of the other parameters given below.
BEGIN {
    fallback["rope_rotate.x"] = "d"
    fallback["clip_grad_norm.sizes"] = "count"
    kinds["int"] = "int"; kinds["size_t"] = "size"; kinds["float"] = "float"
    kinds["double"] = "double"
    kinds["float*"] = "floats"; kinds["constfloat*"] = "floats"
    kinds["int*"] = "ints"; kinds["constint*"] = "ints"
    kinds["Tensor*"] = "tensor"; kinds["constTensor*"] = "tensor"
    kinds["Tensor**"] = "tensor_out"; kinds["constValidLens*"] = "valid_lens"
    kinds["constMultiHeadAttention*"] = "mha"; kinds["KVCache*"] = "kv_cache"
    kinds["constBlock*"] = "block"; kinds["BlockCache*"] = "block_cache"
    kinds["Rng*"] = "rng"; kinds["float*const*"] = "floats_array"
    kinds["function"] = "function"
    ctype["int"] = "int"; ctype["size"] = "size_t"; ctype["float"] = "float"
    ctype["double"] = "double"; ctype["floats"] = "float *"; ctype["ints"] = "int *"
    ctype["tensor"] = "Tensor *"; ctype["tensor_out"] = "Tensor **"
    ctype["valid_lens"] = "ValidLens *"; ctype["mha"] = "MultiHeadAttention *"
    ctype["kv_cache"] = "KVCache *"; ctype["block"] = "Block *"
    ctype["block_cache"] = "BlockCache *"; ctype["rng"] = "Rng *"
    ctype["floats_array"] = "float **"; ctype["function"] = "GraderFunction"
    # the kinds with something to send back after the call
    back["tensor_out"] = 1; back["kv_cache"] = 1; back["block_cache"] = 1; back["rng"] = 1
    rets["void"] = "void"; rets["Tensor*"] = "tensor"; rets["ValidLens*"] = "valid_lens"
    rets["int"] = "int"; rets["size_t"] = "size"; rets["double"] = "double"
    rets["float"] = "float"
}
# a declaration: from a line that names my_ to the line that ends in ";"
/^[A-Za-z].*[ *]my_[a-z_0-9]+\(/ { decl = ""; collecting = 1 }
collecting {
    line = $0
    sub(/\/\*.*$/, "", line)
    decl = decl " " line
    if (line ~ /;[ \t]*$/) { collecting = 0; parse(decl) }
}
function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
function die(msg) { print "stubs.awk: " msg > "/dev/stderr"; failed = 1; exit 1 }
function parse(d,    open, head, params, name, ret, depth, i, c, cur, n, p, pname, ptype, key) {
    gsub(/[ \t]+/, " ", d)
    d = trim(d)
    sub(/;$/, "", d)
    open = index(d, "(")
    head = substr(d, 1, open - 1)
    params = substr(d, open + 1)
    sub(/\)$/, "", params)
    name = head
    sub(/^.*[ *]/, "", name)
    ret = substr(head, 1, length(head) - length(name))
    gsub(/ /, "", ret)
    if (!(ret in rets)) die("my " name ": no kind for the return type " ret)
    count++
    names[count] = name
    decls[count] = head "(" params ")"
    retkind[count] = rets[ret]
    retc[count] = ret
    # the parameters, split at the commas outside parentheses
    n = 0; depth = 0; cur = ""
    for (i = 1; i <= length(params); i++) {
        c = substr(params, i, 1)
        if (c == "(") depth++
        if (c == ")") depth--
        if (c == "," && depth == 0) { plist[++n] = trim(cur); cur = ""; continue }
        cur = cur c
    }
    plist[++n] = trim(cur)
    nparams[count] = n
    for (p = 1; p <= n; p++) {
        if (plist[p] ~ /\(\*/) {
            pname = plist[p]; sub(/^.*\(\*/, "", pname); sub(/\).*$/, "", pname)
            ptype = "function"
        } else {
            pname = plist[p]; sub(/^.*[ *]/, "", pname)
            ptype = substr(plist[p], 1, length(plist[p]) - length(pname))
            gsub(/ /, "", ptype)
        }
        if (!(ptype in kinds)) die(name ": no kind for the parameter type " ptype " of " pname)
        pnames[count, p] = pname
        pkinds[count, p] = kinds[ptype]
        key = name "." pname
        sub(/^my_/, "", key)
        pfall[count, p] = (key in fallback) ? fallback[key] : "-1"
    }
}
END {
    if (failed) exit 1
    print "/* made by tests/grader/judge/stubs.awk from tests/grader/exercises_0N.h: do not edit */"
    print "#include \"sides.h\""
    print ""
    print "#ifdef JUDGE"
    for (e = 1; e <= count; e++) {
        print decls[e]
        print "{"
        print "    Wire *w = judge_begin();"
        for (p = 1; p <= nparams[e]; p++) {
            k = pkinds[e, p]
            if (k == "floats" || k == "ints")
                printf "    jput_%s(w, %s, %s);\n", k, pnames[e, p], pfall[e, p]
            else if (k == "floats_array")
                printf "    jput_%s(w, %s, count);\n", k, pnames[e, p]
            else
                printf "    jput_%s(w, %s);\n", k, pnames[e, p]
        }
        print "    judge_call(w);"
        for (p = 1; p <= nparams[e]; p++)
            if (pkinds[e, p] in back) printf "    jback_%s(w, %s);\n", pkinds[e, p], pnames[e, p]
        if (retkind[e] == "void") {
            print "    judge_end(w);"
        } else {
            printf "    %s result = jret_%s(w);\n", ctype[retkind[e]], retkind[e]
            print "    judge_end(w);"
            print "    return result;"
        }
        print "}"
        print ""
    }
    print "#else"
    for (e = 1; e <= count; e++) {
        short = names[e]; sub(/^my_/, "", short)
        printf "#ifdef RUN_%s\n", short
        printf "const char runner_exercise[] = \"%s\";\n", short
        print decls[e] ";"
        print "void runner_call(WireIn *in, WireOut *out)"
        print "{"
        args = ""
        for (p = 1; p <= nparams[e]; p++) {
            k = pkinds[e, p]
            printf "    %s a%d = rtake_%s(in);\n", ctype[k], p, k
            args = args (p > 1 ? ", " : "") "a" p
        }
        print "    if (!runner_arguments_ok(in))"
        print "        return;"
        if (retkind[e] == "void") printf "    %s(%s);\n", names[e], args
        else printf "    %s result = %s(%s);\n", ctype[retkind[e]], names[e], args
        print "    runner_regions(out);"
        for (p = 1; p <= nparams[e]; p++)
            if (pkinds[e, p] in back) printf "    rsend_%s(out, a%d);\n", pkinds[e, p], p
        if (retkind[e] != "void") printf "    rret_%s(out, result);\n", retkind[e]
        print "}"
        print "#endif"
    }
    print "#endif"
}
