/* sanitizer_options.c - the sanitizers' settings, built into the runner and
 * into a chapter program that holds the learner's pieces alike (make
 * NN_chapter EXERCISE=...), so that a file sees the same settings in both,
 * and none in its environment: a report ends the program with status 3
 * (the judge reads it), a fault is left to the signal (the judge names
 * it), and leaks are not errors. Unused without the sanitizers. */
const char *__asan_default_options(void);
const char *__ubsan_default_options(void);

const char *__asan_default_options(void)
{
    return "detect_leaks=0:exitcode=3:handle_segv=0:handle_abort=0";
}

const char *__ubsan_default_options(void) { return "exitcode=3:print_stacktrace=1"; }
