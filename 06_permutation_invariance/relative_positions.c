/*
 * relative_positions - which symmetry each way of adding positions keeps,
 * checked exactly, and what a model trained with each one does on
 * sequences longer than it saw (chapter 06's page
 * relative_positions.md).
 *
 * Part 1: the symmetry table. One untrained model per scheme (none,
 *         sinusoidal, learned, RoPE, ALiBi): how much the logits change
 *         when the tokens are permuted (rows put back), and when every
 *         position moves by an offset S.
 * Part 2: RoPE's score q_m . k_n depends on m - n only, over all pairs.
 * Part 3: ALiBi's bias, one heatmap per head.
 * Part 4: (--train) two tasks trained at length L, measured at L, 2L and
 *         4L, for the five schemes over several seeds.
 * Part 5: (--train) where one trained model per scheme looks.
 * --from DIR --to DIR: attention with RoPE or ALiBi on queries, keys and
 *         values from .npy files (heads already split), for a check
 *         against PyTorch.
 *
 * Legend: B = batch_size, H = num_heads, T = tokens, D = num_hiddens,
 * d = D / H, V = vocabulary, L = training length.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alibi.h"
#include "io/cli.h"
#include "io/layer_files.h"
#include "io/npy.h"
#include "io/plot.h"
#include "learn/optim.h"
#include "learn/position_model.h"
#include "learn/tasks.h"
#include "ops.h"
#include "rope.h"
#include "tensor.h"

static const char PROG[] = "relative_positions";

enum { MAX_HEADS = 16, MAX_HIDDENS = 128, MAX_TOKENS = HEATMAP_TERMINAL_MAX, MAX_SEEDS = 32,
       MAX_THREADS = 16, NUM_TASKS = 2, NUM_LENGTHS = 3, MAX_OFFSET = 100000 };

/* Each use of randomness draws from its own stream of the seed. */
enum { STREAM_INIT = 1, STREAM_TRAIN = 2, STREAM_HELDOUT = 3, STREAM_INPUTS = 4 };

/* A held-out token accuracy at or above this counts as solved. */
#define SOLVED 0.9

typedef struct {
    uint64_t seed;
    int tokens, hiddens, heads, offset, pairs;
    bool offset_given;
    bool train;
    int length, letters, back, steps, batch, seeds, examples, threads;
    float lr;
    const char *plot_dir, *from_dir, *to_dir, *positions;
    bool causal;
} Options;

/* ---- Part 1: the symmetry table ---------------------------------------------- */

/* The largest |a - b| over the largest |b|: how much b changed, relative. */
static double relative_change(const Tensor *a, const Tensor *b)
{
    return (double)tensor_max_abs_diff(a, b) / fmax((double)tensor_max_abs(b), 1e-30);
}

static void part1_symmetry(const Options *opt)
{
    const int T = opt->tokens, S = opt->offset, V = 2 * T;
    printf("Relative positions: which symmetry survives\n\n"
           "Part 1. One untrained model per way of adding positions (num_hiddens %d,\n"
           "%d heads, no mask), %d tokens. The largest change of the logits, over\n"
           "their largest value, when\n"
           "  - the tokens are permuted, and the rows of the result put back;\n"
           "  - every position moves by S = %d: positions %d ... %d instead of 0 ... %d.\n\n",
           opt->hiddens, opt->heads, T, S, S, S + T - 1, T - 1);
    Rng inputs = rng_new_stream(opt->seed, STREAM_INPUTS);
    int letters[2 * MAX_TOKENS], perm[MAX_TOKENS], permuted[MAX_TOKENS];
    /* T different tokens of 2T (the first T of a shuffle), and a cycle,
     * the permutation that moves every token */
    rng_permutation(&inputs, letters, V);
    const int *tokens = letters;
    for (int t = 0; t < T; t++)
        perm[t] = (t + 1) % T;
    for (int t = 0; t < T; t++)
        permuted[t] = tokens[perm[t]];

    printf("  %-12s %18s %18s\n", "positions", "permuted tokens", "offset S");
    for (int scheme = 0; scheme < POSITION_SCHEMES; scheme++) {
        Rng init = rng_new_stream(opt->seed, STREAM_INIT);
        PositionModel *model = position_model_new(V, opt->hiddens, opt->heads, scheme,
                                                  S + T, false, &init);
        Tensor *logits = position_model_forward(model, tokens, 1, T, 0, NULL, NULL);
        Tensor *of_permuted = position_model_forward(model, permuted, 1, T, 0, NULL, NULL);
        Tensor *shifted = position_model_forward(model, tokens, 1, T, S, NULL, NULL);
        /* row t of of_permuted belongs to token perm[t]: put it back */
        Tensor *put_back = tensor_copy(logits);
        for (int t = 0; t < T; t++)
            memcpy(&AT3(put_back, 0, perm[t], 0), &AT3(of_permuted, 0, t, 0),
                   (size_t)V * sizeof(float));
        printf("  %-12s %18.1e %18.1e\n", position_scheme_names[scheme],
               relative_change(put_back, logits), relative_change(shifted, logits));
        TENSOR_FREE(logits, of_permuted, shifted, put_back);
        position_model_free(model);
    }
    printf("\nNo positions: equivariant under both. Sinusoidal and learned positions are\n"
           "vectors of the absolute position, so both change the logits. RoPE and ALiBi\n"
           "see only i - j: a permutation still changes the logits, the offset does not,\n"
           "up to float32 rounding.\n\n");
}

/* ---- Part 2: RoPE depends on m - n only --------------------------------------- */

static void part2_rope_relative(const Options *opt)
{
    const int d = opt->hiddens / opt->heads, P = opt->pairs, S = opt->offset;
    Rng inputs = rng_new_stream(opt->seed + 1, STREAM_INPUTS);
    Tensor *q = tensor_normal(&inputs, 0, 1, SHAPE(1, 1, d));
    Tensor *k = tensor_normal(&inputs, 0, 1, SHAPE(1, 1, d));
    /* one query and one key, each turned for every position 0 ... P-1 and
     * S ... S+P-1: rows of (1, P, d) */
    Tensor *qs = tensor_zeros(SHAPE(2, P, d)), *ks = tensor_zeros(SHAPE(2, P, d));
    for (int s = 0; s < 2; s++)
        for (int m = 0; m < P; m++) {
            memcpy(&AT3(qs, s, m, 0), q->data, (size_t)d * sizeof(float));
            memcpy(&AT3(ks, s, m, 0), k->data, (size_t)d * sizeof(float));
        }
    Tensor *q0 = tensor_slice(qs, 0, 0, 1), *q1 = tensor_slice(qs, 0, 1, 1);
    Tensor *k0 = tensor_slice(ks, 0, 0, 1), *k1 = tensor_slice(ks, 0, 1, 1);
    rope_rotate(q0, 0, false);
    rope_rotate(k0, 0, false);
    rope_rotate(q1, S, false);
    rope_rotate(k1, S, false);
    Tensor *scores0 = matmul_bt(q0, k0), *scores1 = matmul_bt(q1, k1);   /* (1, P, P) */

    /* every pair against the pair of the same distance that starts at 0 */
    double worst = 0.0, lowest = INFINITY, highest = -INFINITY, largest = 0.0;
    for (int s = 0; s < 2; s++) {
        const Tensor *scores = s == 0 ? scores0 : scores1;
        for (int m = 0; m < P; m++)
            for (int n = 0; n < P; n++) {
                const float score = AT3(scores, 0, m, n);
                const float reference = m >= n ? AT3(scores0, 0, m - n, 0)
                                               : AT3(scores0, 0, 0, n - m);
                worst = fmax(worst, fabs((double)score - reference));
                lowest = fmin(lowest, score);
                highest = fmax(highest, score);
                largest = fmax(largest, fabs(score));
            }
    }
    const double spacing = nextafterf((float)largest, INFINITY) - (float)largest;
    printf("Part 2. RoPE's score depends on m - n only. One query q and one key k\n"
           "(d = %d) are turned for positions m and n, over all %d pairs with m, n in\n"
           "0 ... %d and again in %d ... %d; each score q_m . k_n is compared with\n"
           "the one at the same distance that starts at 0 (q_{m-n} . k_0 or\n"
           "q_0 . k_{n-m}).\n\n"
           "  the scores range from %.4f to %.4f as m - n changes;\n"
           "  the largest deviation is %.1e, %.1f times the float32 spacing at the\n"
           "  largest score, %.2f (%.1e): rounding, and nothing else.\n\n",
           d, 2 * P * P, P - 1, S, S + P - 1, lowest, highest, worst, worst / spacing, largest,
           spacing);
    /* a dot product of d rounded terms is off by a few spacings at most */
    cli_check(PROG, worst <= d * spacing, "RoPE's scores depend on m - n only");
    TENSOR_FREE(q, k, qs, ks, q0, q1, k0, k1, scores0, scores1);
}

/* ---- Part 3: ALiBi's bias per head ---------------------------------------------- */

/* "1/256" for 2^-8, else "0.0884" */
static void slope_text(char *buf, size_t len, double slope)
{
    const double inverse = 1.0 / slope;
    if (inverse == floor(inverse))
        snprintf(buf, len, "1/%.0f", inverse);
    else
        snprintf(buf, len, "%.4f", slope);
}

static int part3_alibi(const Options *opt)
{
    const int H = opt->heads, T = opt->tokens;
    double slopes[MAX_HEADS];
    alibi_slopes(H, slopes);
    printf("Part 3. ALiBi's bias. Head h adds -m_h |i - j| to the scaled score of query i\n"
           "and key j; with %d heads the slopes m_h are", H);
    for (int h = 0; h < H; h++) {
        char text[32];
        slope_text(text, sizeof text, slopes[h]);
        printf("%s %s", h == 0 ? "" : ",", text);
    }
    printf(".\nDrawn is exp(-m_h |i - j|), the factor by which the bias multiplies a\n"
           "weight before the softmax normalises the row: a steep head looks near, a\n"
           "shallow one almost everywhere.\n");
    Tensor *bias = alibi_bias(H, T, T);   /* (H, T, T) */
    for (size_t i = 0; i < bias->size; i++)
        bias->data[i] = expf(bias->data[i]);
    char title_text[MAX_HEADS][64];
    const char *titles[MAX_HEADS];
    for (int h = 0; h < H; h++) {
        char slope[32];
        slope_text(slope, sizeof slope, slopes[h]);
        snprintf(title_text[h], sizeof title_text[h], "head %d, m = %s", h + 1, slope);
        titles[h] = title_text[h];
        Tensor *matrix = tensor_select(bias, 0, h);
        printf("\n");
        heatmap_terminal(stdout, matrix, title_text[h]);
        tensor_free(matrix);
    }
    printf("\n");
    int status = 0;
    if (opt->plot_dir != NULL) {
        status = plot_heatmaps(opt->plot_dir, "relative_positions_alibi", bias, "key j",
                               "query i", titles) == 0 ? 0 : 1;
        if (status == 0)
            printf("wrote %s/relative_positions_alibi.dat and .gp\n\n", opt->plot_dir);
    }
    tensor_free(bias);
    return status;
}

/* ---- Part 4: trained at L, measured at L, 2L, 4L --------------------------------- */

typedef enum { TASK_BACK, TASK_REVERSE } TaskId;

/* The answers of a batch of task_reversal sequences for the task asked:
 * reversal keeps them; "k back" puts the token k places back at t >= k. */
static void set_answers(TaskId task, int back, TaskBatch *batch)
{
    if (task == TASK_REVERSE)
        return;
    const int T = batch->num_pairs;
    for (int b = 0; b < batch->batch_size; b++)
        for (int t = 0; t < T; t++)
            batch->answers[b * T + t] = t >= back ? batch->keys[b * T + t - back] : -1;
}

static int first_scored(TaskId task, int back)
{
    return task == TASK_BACK ? back : 0;
}

typedef struct {
    const Options *opt;
    TaskId task;
    PositionScheme scheme;
    uint64_t seed;
    const TaskBatch *const *held_out;   /* one per length */
    double accuracy[NUM_LENGTHS];
    bool diverged;
    PositionModel *model;               /* kept for the first seed, else freed */
} Job;

static void run_job(Job *job)
{
    const Options *opt = job->opt;
    const int L = opt->length;
    Rng init = rng_new_stream(job->seed, STREAM_INIT);
    Rng data = rng_new_stream(job->seed, STREAM_TRAIN);
    /* rows for 4L positions: the learned table has them, trained or not */
    PositionModel *model = position_model_new(opt->letters, opt->hiddens, opt->heads,
                                              job->scheme, 4 * L, job->task == TASK_BACK,
                                              &init);
    Adam *adam = adam_new(model->params, model->num_params, opt->lr);
    Task task = task_reversal(L, opt->letters);
    TaskBatch *batch = task_batch_new(&task, opt->batch);
    const int first = first_scored(job->task, opt->back);
    for (int step = 1; step <= opt->steps && !job->diverged; step++) {
        task_draw(&task, batch, SPLIT_TRAIN, &data);
        set_answers(job->task, opt->back, batch);
        const double loss = position_model_train_step(model, adam, batch->keys, batch->answers,
                                                      opt->batch, L, first);
        job->diverged = !isfinite(loss);
    }
    for (int i = 0; i < NUM_LENGTHS; i++) {
        const TaskBatch *h = job->held_out[i];
        job->accuracy[i] = job->diverged ? 0.0
                                         : position_model_accuracy(model, h->keys, h->answers,
                                                                   h->batch_size, h->num_pairs,
                                                                   first);
    }
    task_batch_free(batch);
    adam_free(adam);
    job->model = model;
}

typedef struct {
    Job *jobs;
    int count, next;
    pthread_mutex_t lock;
} JobQueue;

/* Each thread takes the next job until none is left. A job depends on its
 * own seed only, so the results are the same for any number of threads. */
static void *worker(void *arg)
{
    JobQueue *queue = arg;
    for (;;) {
        pthread_mutex_lock(&queue->lock);
        const int j = queue->next++;
        pthread_mutex_unlock(&queue->lock);
        if (j >= queue->count)
            return NULL;
        run_job(&queue->jobs[j]);
    }
}

static void run_jobs(Job *jobs, int count, int threads)
{
    JobQueue queue = {jobs, count, 0, PTHREAD_MUTEX_INITIALIZER};
    pthread_t ids[MAX_THREADS];
    int started = 0;
    for (int i = 0; i < threads; i++)
        if (pthread_create(&ids[started], NULL, worker, &queue) == 0)
            started++;
    if (started == 0)
        worker(&queue);   /* no thread could start: do it all here */
    for (int i = 0; i < started; i++)
        pthread_join(ids[i], NULL);
}

static int compare_doubles(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static const char *const TASK_TITLES[NUM_TASKS] = {
    "Task 1: the token %d place%s back (causal mask)",
    "Task 2: reversal, the token at T-1-t (no mask)"};

/* One cell of a row of NUM_LENGTHS: padded but the last, so that no line
 * ends in spaces. */
static void print_cell(int i, const char *text)
{
    printf(i + 1 < NUM_LENGTHS ? "  %-22s" : "  %s", text);
}

static void print_table(const Options *opt, TaskId task, const Job *jobs)
{
    const int L = opt->length, N = opt->seeds;
    printf(TASK_TITLES[task], opt->back, plural(opt->back, "", "s"));
    printf("\n\n  %-11s", "");
    for (int i = 0; i < NUM_LENGTHS; i++) {
        char head[32];
        snprintf(head, sizeof head, "T = %d%s", L << i, i == 0 ? " (trained)" : "");
        print_cell(i, head);
    }
    printf("\n  %-11s", "positions");
    for (int i = 0; i < NUM_LENGTHS; i++)
        print_cell(i, "solved median  range");
    printf("\n");
    for (int scheme = 0; scheme < POSITION_SCHEMES; scheme++) {
        printf("  %-11s", position_scheme_names[scheme]);
        for (int i = 0; i < NUM_LENGTHS; i++) {
            double acc[MAX_SEEDS];
            int solved = 0;
            for (int s = 0; s < N; s++) {
                acc[s] = jobs[scheme * N + s].accuracy[i];
                solved += acc[s] >= SOLVED;
            }
            qsort(acc, (size_t)N, sizeof acc[0], compare_doubles);
            const double median = N % 2 ? acc[N / 2] : 0.5 * (acc[N / 2 - 1] + acc[N / 2]);
            char cell[64];
            snprintf(cell, sizeof cell, "%2d/%-2d %5.1f%% %3.0f-%.0f%%", solved, N,
                     100 * median, 100 * acc[0], 100 * acc[N - 1]);
            print_cell(i, cell);
        }
        printf("\n");
    }
    /* What a model that sees which letters are there, but not where, gets
     * by guessing among the candidates: for reversal the other T - 1
     * letters; for the causal task at position t the t earlier ones, a
     * mean of 1/t over the scored positions. */
    printf("  %-11s", "chance");
    for (int i = 0; i < NUM_LENGTHS; i++) {
        const int T = L << i;
        double chance = 0.0;
        if (task == TASK_REVERSE)
            chance = 1.0 / (T - 1);
        else
            for (int t = opt->back; t < T; t++)
                chance += 1.0 / t / (T - opt->back);
        char cell[64];
        snprintf(cell, sizeof cell, "      %5.1f%%", 100.0 * chance);
        print_cell(i, cell);
    }
    printf("\n\n");
}

/* Every trained job's model is freed but the first seed's of each scheme,
 * which part 5 draws. */
static bool part4_lengths(const Options *opt, Job *jobs, TaskBatch *held_out[][NUM_LENGTHS])
{
    const int L = opt->length, N = opt->seeds;
    printf("Part 4. Trained at length L = %d, measured at L, 2L and 4L. Each model: %d\n"
           "letters, num_hiddens %d, %d heads, %d Adam steps of %d sequences (lr %g),\n"
           "seeds %llu ... %llu; held out: %d sequences per length, never trained on.\n"
           "A cell: how many seeds reach %.0f%% held-out token accuracy, the median\n"
           "accuracy and its range over the seeds.\n\n",
           L, opt->letters, opt->hiddens, opt->heads, opt->steps, opt->batch, (double)opt->lr,
           (unsigned long long)opt->seed, (unsigned long long)(opt->seed + N - 1),
           opt->examples, 100 * SOLVED);
    fflush(stdout);
    const int count = NUM_TASKS * POSITION_SCHEMES * N;
    for (int j = 0; j < count; j++) {
        const int task = j / (POSITION_SCHEMES * N), scheme = j / N % POSITION_SCHEMES;
        jobs[j] = (Job){.opt = opt, .task = (TaskId)task, .scheme = (PositionScheme)scheme,
                        .seed = opt->seed + (uint64_t)(j % N),
                        .held_out = (const TaskBatch *const *)held_out[task]};
    }
    run_jobs(jobs, count, opt->threads);
    bool ok = true;
    for (int j = 0; j < count; j++) {
        if (jobs[j].diverged) {
            fprintf(stderr, "%s: %s, %s positions, seed %llu: the loss stopped being a number; "
                    "try a smaller --lr\n", PROG, jobs[j].task == TASK_BACK ? "k back" : "reversal",
                    position_scheme_names[jobs[j].scheme], (unsigned long long)jobs[j].seed);
            ok = false;
        }
        if (j % N != 0) {
            position_model_free(jobs[j].model);
            jobs[j].model = NULL;
        }
    }
    if (!ok)
        return false;
    for (int task = 0; task < NUM_TASKS; task++)
        print_table(opt, (TaskId)task, jobs + task * POSITION_SCHEMES * N);
    printf("Past L, the learned table's rows %d ... %d were never in a training\n"
           "sequence: their gradient was always 0, and they hold their first draw from\n"
           "N(0, 1), as nn.Embedding's initialisation left them. The sinusoidal\n"
           "encoding has a row for every position, but the model was never trained on\n"
           "the rows past L.\n\n", L, 4 * L - 1);
    return true;
}

/* ---- Part 5: where the trained models look -------------------------------------- */

/* model, held-out set -> the weights (T, T) averaged over sequences and heads */
static Tensor *mean_weights(const PositionModel *model, const TaskBatch *held_out)
{
    const int B = held_out->batch_size, T = held_out->num_pairs, H = model->num_heads;
    Tensor *weights = NULL;   /* (B, H, T, T) */
    Tensor *logits = position_model_forward(model, held_out->keys, B, T, 0, &weights, NULL);
    Tensor *mean = tensor_zeros(SHAPE(T, T));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (size_t i = 0; i < mean->size; i++)
                mean->data[i] += weights->data[((size_t)b * H + h) * T * T + i] / (float)(B * H);
    TENSOR_FREE(weights, logits);
    return mean;
}

static int part5_heatmaps(const Options *opt, const Job *jobs,
                          TaskBatch *held_out[][NUM_LENGTHS])
{
    const int N = opt->seeds, L = opt->length;
    printf("Part 5. Where the first seed's task-1 models look at T = %d, past the\n"
           "training length: queries %d ... %d (rows 0 ... %d), every key (columns),\n"
           "the weights averaged over the held-out sequences and the heads.\n",
           2 * L, L, 2 * L - 1, L - 1);
    int status = 0;
    for (int task = 0; task < NUM_TASKS; task++) {
        /* task 1 at 2L, past what it was trained on; task 2 at L (--plot only) */
        const int length_index = task == TASK_BACK ? 1 : 0;
        const TaskBatch *set = held_out[task][length_index];
        const int T = set->num_pairs;
        Tensor *panels = tensor_zeros(SHAPE(POSITION_SCHEMES, T, T));
        char title_text[POSITION_SCHEMES][80];
        const char *titles[POSITION_SCHEMES];
        for (int scheme = 0; scheme < POSITION_SCHEMES; scheme++) {
            const PositionModel *model = jobs[(task * POSITION_SCHEMES + scheme) * N].model;
            Tensor *mean = mean_weights(model, set);
            memcpy(panels->data + (size_t)scheme * T * T, mean->data, mean->size * sizeof(float));
            snprintf(title_text[scheme], sizeof title_text[scheme], "%s, %s, T = %d",
                     task == TASK_BACK ? "k back" : "reversal", position_scheme_names[scheme], T);
            titles[scheme] = title_text[scheme];
            if (task == TASK_BACK) {
                Tensor *past = tensor_slice(mean, 0, L, T - L);   /* (T - L, T) */
                printf("\n");
                heatmap_terminal(stdout, past, position_scheme_names[scheme]);
                tensor_free(past);
            }
            tensor_free(mean);
        }
        if (opt->plot_dir != NULL && status == 0) {
            const char *name = task == TASK_BACK ? "relative_positions_back"
                                                 : "relative_positions_reversal";
            if (plot_heatmaps(opt->plot_dir, name, panels, "key", "query", titles) != 0)
                status = 1;
            if (status == 0)
                printf("\nwrote %s/%s.dat and .gp (every query)\n", opt->plot_dir, name);
        }
        tensor_free(panels);
    }
    printf("\n");
    return status;
}

static int run_training(const Options *opt)
{
    const int L = opt->length;
    TaskBatch *held_out[NUM_TASKS][NUM_LENGTHS];
    for (int i = 0; i < NUM_LENGTHS; i++) {
        /* the same sequences for both tasks, only the answers differ */
        Task task = task_reversal(L << i, opt->letters);
        Rng rng = rng_new_stream(opt->seed, STREAM_HELDOUT);
        for (int t = 0; t < NUM_TASKS; t++) {
            held_out[t][i] = task_batch_new(&task, opt->examples);
            Rng same = rng;
            task_draw(&task, held_out[t][i], SPLIT_HELDOUT, &same);
            set_answers((TaskId)t, opt->back, held_out[t][i]);
        }
    }
    const int count = NUM_TASKS * POSITION_SCHEMES * opt->seeds;
    Job *jobs = checked_calloc(PROG, (size_t)count, sizeof *jobs);
    int status = 1;
    if (part4_lengths(opt, jobs, held_out))
        status = part5_heatmaps(opt, jobs, held_out);
    for (int j = 0; j < count; j++)
        position_model_free(jobs[j].model);
    free(jobs);
    for (int t = 0; t < NUM_TASKS; t++)
        for (int i = 0; i < NUM_LENGTHS; i++)
            task_batch_free(held_out[t][i]);
    return status;
}

/* ---- --from DIR --to DIR ----------------------------------------------------------- */

static const char *const FILE_NAMES[3] = {"queries", "keys", "values"};

/* One line after the program's name, printf-style; returns 1. */
__attribute__((format(printf, 1, 2))) static int fail(const char *fmt, ...)
{
    fflush(stdout);
    fprintf(stderr, "%s: ", PROG);
    va_list args;
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fprintf(stderr, "\n");
    return 1;
}

/* DIR/queries, keys, values.npy, each (B, H, T, d) -> in[3]; 0, or 1 after
 * one line */
static int load_inputs(const char *dir, Tensor *in[3])
{
    char err[LAYER_FILES_ERR_LEN], path[4096], a[64], b[64];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s.npy", dir, FILE_NAMES[i]);
        in[i] = npy_load(path, err, sizeof err);
        if (in[i] == NULL)
            return fail("%s", err);
        if (in[i]->ndim != 4)
            return fail("%s: expected 4 dimensions (batch_size, num_heads, num_tokens, "
                        "head_size), got %d", path, in[i]->ndim);
        if (i > 0 && !tensor_has_shape(in[i], 4, in[0]->shape))
            return fail("%s: shape %s differs from queries.npy's %s", path,
                        shape_str(a, sizeof a, 4, in[i]->shape),
                        shape_str(b, sizeof b, 4, in[0]->shape));
    }
    return 0;
}

/* (B*H, T, d) x3 -> DIR/scores.npy, weights.npy, output.npy */
static int run_files(const Options *opt, HeadPositions positions)
{
    Tensor *in[3] = {NULL, NULL, NULL};
    int status = load_inputs(opt->from_dir, in);
    const int *shape = in[0] != NULL ? in[0]->shape : NULL;
    if (status == 0 && positions == HEAD_POSITIONS_ROPE && shape[3] % 2 != 0)
        status = fail("RoPE turns pairs of columns: the head size (the last dimension of "
                      "%s/queries.npy) must be even, got %d", opt->from_dir, shape[3]);
    if (status == 0 && (long long)opt->offset + shape[2] > ROPE_MAX_POSITION) {
        fail("--offset %d with %d tokens reaches position %lld; positions must stay below "
             "2^24 = %d, where float32 stops holding every integer", opt->offset, shape[2],
             (long long)opt->offset + shape[2] - 1, ROPE_MAX_POSITION);
        status = EXIT_USAGE;
    }
    if (status != 0) {
        TENSOR_FREE(in[0], in[1], in[2]);
        return status;
    }
    const int B = shape[0], H = shape[1], T = shape[2], d = shape[3];
    for (int i = 0; i < 3; i++)
        tensor_reshape(in[i], SHAPE(B * H, T, d));
    const PositionAttention how = {positions, H, opt->offset, opt->causal};
    Tensor *scores = NULL, *weights = NULL;
    Tensor *output = position_attention_forward(&how, in[0], in[1], in[2], &scores, &weights,
                                                NULL);
    tensor_reshape(scores, SHAPE(B, H, T, T));
    tensor_reshape(weights, SHAPE(B, H, T, T));
    tensor_reshape(output, SHAPE(B, H, T, d));
    const NamedTensor set[3] = {{"scores", scores, NULL}, {"weights", weights, NULL},
                                {"output", output, NULL}};
    for (int i = 0; i < 3 && status == 0; i++)
        if (tensor_first_non_finite(set[i].tensor) < set[i].tensor->size)
            status = fail("the %s are not finite: the inputs in %s are too large for float32",
                          set[i].name, opt->from_dir);
    char err[LAYER_FILES_ERR_LEN];
    if (status == 0 && layer_files_save(opt->to_dir, set, 3, err, sizeof err) != 0)
        status = fail("%s", err);
    if (status == 0)
        printf("%s positions%s, S = %d, (B, H, T, d) = (%d, %d, %d, %d)\n"
               "wrote %s/scores.npy (B, H, T, T), weights.npy (B, H, T, T), "
               "output.npy (B, H, T, d)\n", opt->positions, opt->causal ? ", causal" : "",
               opt->offset, B, H, T, d, opt->to_dir);
    TENSOR_FREE(in[0], in[1], in[2], scores, weights, output);
    return status;
}

/* ---- the command line ------------------------------------------------------------- */

static Options parse_options(int argc, char **argv)
{
    Options opt = {.seed = 0, .tokens = 8, .hiddens = 32, .heads = 4, .offset = 1000,
                   .pairs = 64, .length = 6, .letters = 24, .back = 1, .steps = 200,
                   .batch = 16, .seeds = 4, .examples = 200, .threads = 2, .lr = 0.01f};
    const CliOption options[] = {
        {"--tokens", CLI_INT, &opt.tokens, .min = 2, .max = MAX_TOKENS, .metavar = "T",
         .help = "tokens of parts 1 and 3"},
        {"--hiddens", CLI_INT, &opt.hiddens, .min = 2, .max = MAX_HIDDENS, .metavar = "D",
         .help = "num_hiddens"},
        {"--heads", CLI_INT, &opt.heads, .min = 1, .max = MAX_HEADS, .metavar = "H",
         .help = "num_heads; D / H must be even for RoPE"},
        {"--offset", CLI_INT, &opt.offset, .min = 0, .max = ROPE_MAX_POSITION, .metavar = "S",
         .help = "first position of the moved sequence (parts 1, 2);\nwith --from, the first "
                 "position", .given = &opt.offset_given,
         .default_text = "1000; 0 with --from"},
        {"--pairs", CLI_INT, &opt.pairs, .min = 2, .max = 512, .metavar = "P",
         .help = "positions of part 2's check"},
        {"--train", CLI_FLAG, &opt.train, .help = "parts 4 and 5: train and measure"},
        {"--length", CLI_INT, &opt.length, .min = 2, .max = MAX_TOKENS / 2, .metavar = "L",
         .help = "training length; measured at L, 2L, 4L"},
        {"--letters", CLI_INT, &opt.letters, .min = 4, .max = TASK_MAX_LETTERS, .metavar = "V",
         .help = "vocabulary, at least 4L"},
        {"--back", CLI_INT, &opt.back, .min = 1, .max = MAX_TOKENS, .metavar = "k",
         .help = "task 1: the token k places back"},
        {"--steps", CLI_INT, &opt.steps, .min = 1, .max = 100000, .metavar = "N",
         .help = "Adam steps per model"},
        {"--batch", CLI_INT, &opt.batch, .min = 1, .max = 1024, .metavar = "B",
         .help = "sequences per step"},
        {"--lr", CLI_FLOAT, &opt.lr, .min = 1e-6, .max = 1.0, .metavar = "LR",
         .help = "Adam's learning rate"},
        {"--seeds", CLI_INT, &opt.seeds, .min = 1, .max = MAX_SEEDS, .metavar = "N",
         .help = "seeds per scheme and task"},
        {"--examples", CLI_INT, &opt.examples, .min = 1, .max = 5000, .metavar = "N",
         .help = "held-out sequences per length"},
        {"--threads", CLI_INT, &opt.threads, .min = 1, .max = MAX_THREADS, .metavar = "N",
         .help = "threads over seeds (the results do not depend on it)"},
        {"--seed", CLI_U64, &opt.seed, .metavar = "S", .help = "the first seed"},
        {"--plot", CLI_DIR, &opt.plot_dir, .metavar = "DIR",
         .help = "write the heatmaps as DIR/relative_positions_*.{dat,gp}"},
        {"--from", CLI_STRING, &opt.from_dir, .metavar = "DIR",
         .help = "read queries, keys, values.npy (B, H, T, d)"},
        {"--to", CLI_DIR, &opt.to_dir, .metavar = "DIR",
         .help = "with --from: write scores, weights, output.npy"},
        {"--positions", CLI_STRING, &opt.positions, .metavar = "P",
         .help = "with --from: none, rope or alibi"},
        {"--causal", CLI_FLAG, &opt.causal, .help = "with --from: query i sees keys j <= i"},
    };
    cli_parse(&(CliTable){PROG, "Which symmetry each way of adding positions keeps, and what "
                          "a model learns with it.", CLI_COUNT(options), options},
              argc, argv);
    if (opt.from_dir != NULL) {
        cli_check_input_dir(PROG, "--from", opt.from_dir);
        if (opt.to_dir == NULL)
            cli_fail(PROG, "--from needs --to DIR, where the results go");
        if (opt.positions == NULL)
            cli_fail(PROG, "--from needs --positions none, rope or alibi");
        if (!opt.offset_given)
            opt.offset = 0;
    } else {
        if (opt.to_dir != NULL || opt.positions != NULL || opt.causal)
            cli_fail(PROG, "--to, --positions and --causal go with --from DIR");
        if (opt.offset > MAX_OFFSET)
            cli_fail(PROG, "--offset %d: parts 1 and 2 build tables of every position, "
                     "up to %d", opt.offset, MAX_OFFSET);
        if (opt.hiddens % opt.heads != 0 || (opt.hiddens / opt.heads) % 2 != 0)
            cli_fail(PROG, "--hiddens %d / --heads %d must be a whole, even head size: RoPE "
                     "turns pairs", opt.hiddens, opt.heads);
        if (opt.letters < 4 * opt.length)
            cli_fail(PROG, "--letters %d is fewer than 4 x --length %d: a sequence of 4L "
                     "holds different letters", opt.letters, opt.length);
        if (opt.back >= opt.length)
            cli_fail(PROG, "--back %d must be below --length %d", opt.back, opt.length);
    }
    return opt;
}

int main(int argc, char **argv)
{
    Options opt = parse_options(argc, argv);
    if (opt.from_dir != NULL) {
        const char *names[3] = {"none", "rope", "alibi"};
        for (int p = 0; p < 3; p++)
            if (strcmp(opt.positions, names[p]) == 0)
                return run_files(&opt, (HeadPositions)p);
        cli_fail(PROG, "--positions '%s': expected none, rope or alibi", opt.positions);
    }
    part1_symmetry(&opt);
    part2_rope_relative(&opt);
    int status = part3_alibi(&opt);
    if (status == 0 && opt.train)
        status = run_training(&opt);
    return status != 0 ? status : cli_checks_status(PROG);
}
