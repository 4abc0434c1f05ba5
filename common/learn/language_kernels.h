/*
 * language_kernels.h - the kernels the character-level GPT runs, its own
 * table (introduced in chapter 06's page "A language model"): attention,
 * the linear layers (the MLP's and the tied unembedding), GELU, each with
 * its backward, and the threads they may use.
 *
 * The model starts with the clear ones, the code the chapters teach
 * (multihead.h's layer, ops.h's linear, mlp.h's GELU), on one thread; a
 * program may hand it the fast ones (fast/fast_attention_layer.h and
 * fast/fast_exp.h: language_kernels in 06_permutation_invariance/
 * language_run.h), and the model stays as it is. name says which, so
 * that a program can print it.
 */
#ifndef LANGUAGE_KERNELS_H
#define LANGUAGE_KERNELS_H

#include "attention_layer.h"
#include "learn/mlp.h"
#include "learn/optim.h"

struct LanguageModel;

typedef struct {
    const char *name;                      /* "clear" or "fast" */
    AttentionForward attention;
    AttentionBackward attention_backward;
    LinearForward linear;
    LinearBackward linear_backward;
    GeluForward gelu;
    GeluBackward gelu_backward;
    int num_threads;                       /* >= 1; the clear ones run on one */
    /* work(arg, t) for t = 0 .. n-1, each share on a thread of its own
     * (fast_threads.h's fast_parallel), or one after the other */
    void (*parallel)(int n, void (*work)(void *arg, int t), void *arg);
    /* a share of a training step (language_model_train_step) in one pass
     * over memory laid out once, the same bits as the pieces one by one
     * (06_permutation_invariance/language_step.h); NULL: the pieces */
    double (*share_step)(struct LanguageModel *share, const int *tokens, int batch_size);
    /* with share_step: the end of a training step (the shares' gradients
     * summed with weights[s], clipped to max_norm, AdamW's step taken) in
     * fewer passes over memory, the same bits (language_step.h); NULL: the
     * pieces */
    void (*update)(struct LanguageModel *model, Adam *adam, const float *weights,
                   double max_norm, int threads);
    /* with share_step: the work every share of a step would do alike, done
     * once before they run, on threads threads (the weights packed for the
     * products); returns what each share's share_step reads in its model's
     * prepared, kept in model. NULL: each share does its own */
    const void *(*prepare)(struct LanguageModel *model, int threads);
} LanguageKernels;

/* The clear table's parallel: every share on the calling thread, in turn. */
static inline void shares_in_turn(int n, void (*work)(void *arg, int t), void *arg)
{
    for (int t = 0; t < n; t++)
        work(arg, t);
}

#define CLEAR_LANGUAGE_KERNELS                                                        \
    ((LanguageKernels){"clear", clear_attention_forward, clear_attention_backward,     \
                       clear_linear, clear_linear_backward, gelu_forward, gelu_backward, 1, \
                       shares_in_turn, NULL, NULL, NULL})

/* the table's attention as the pair attention_layer.h's calls take, its
 * linear layers with it */
static inline AttentionLayer language_attention(const LanguageKernels *k)
{
    return (AttentionLayer){k->attention, k->attention_backward, k->num_threads, k->linear,
                            k->linear_backward};
}

#endif
