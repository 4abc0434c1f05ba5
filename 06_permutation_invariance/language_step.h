/*
 * language_step.h - one share of a training step of the language model in
 * memory laid out once: the forward, the loss and the backward of the
 * whole model on the fast kernels, written into buffers made by the first
 * step and used again by every later one (chapter 06's page "A language
 * model", its section on speed).
 *
 * Legend: B = the share's windows, T = tokens of a window (the context),
 * R = B * T rows, V = vocabulary, D = num_hiddens, H = num_heads,
 * d = D / H, F = 4 D, N = num_layers.
 *
 * The model's own step (learn/language_model.c) runs the pieces one by
 * one, each returning new tensors: the forward of a block, of its
 * attention, of its MLP, each freed after the backward. That is the code to
 * read, and what a learner's pieces plug into. This file runs the same
 * arithmetic in the same order (layer norm as learn/ rounds it, in
 * fast_layer_norm.h's vectors; the products of fast_matmul.h; streaming
 * attention per (window, head); fast GELU; cross-entropy), so every loss
 * and gradient has the same bits, but every activation, every gradient on
 * its way down and every kernel's scratch lives in one ShareMemory, sized
 * for (B, T) by the first step:
 *
 *     per block l   x_l (R, D)       the stream coming in (x_N: after the last)
 *                   h1, Q, K, V, concat, x_mid, h2 (R, D); g (R, F) GELU's
 *                   output, and its slope (R, F) at fc's output, kept for the
 *                   backward (fast_gelu_forward_slope)
 *                   mean1, rstd1, mean2, rstd2 (R,); logsumexp (B H, T)
 *     after them    hf (R, D), meanf, rstdf (R,); logits, grad_logits (R, V)
 *     backward      grad (R, D) the stream's; six (R, D) and one (R, F) on
 *                   their way through a block
 *
 * so 100 steps after the first make no allocation (tests/test_language_model.c
 * counts them, memory.h's memory_allocations).
 */
#ifndef LANGUAGE_STEP_H
#define LANGUAGE_STEP_H

#include "learn/language_model.h"

/* tokens (B, T + 1): inputs 0 .. T-1 of each window, targets 1 .. T ->
 * share's gradients zeroed, then filled; returns the mean loss. The whole
 * model only (no rung of the build-up) with T = the context; the memory is
 * made by the first call (and again when B changes), kept in share. The
 * same bits as language_model_loss_grad on the fast kernels with one
 * thread. */
double language_share_step(LanguageModel *share, const int *tokens, int batch_size);

/* The beginning of language_model_train_step, before the shares
 * (kernels.prepare): every weight model's products read (each block's
 * six, and wte for the unembedding) packed as panels (fast_matmul.h), for
 * the forward and for the backward, on threads threads; made by the first
 * call in model's step memory. Each share's step reads them, where it
 * would otherwise pack each weight itself: once a step, not once per
 * share. The same numbers, so the same bits. */
const void *language_prepare(LanguageModel *model, int threads);

/* The end of language_model_train_step, after the shares (adam->step
 * already counted): the shares' gradients summed with weights (LM_SHARES,)
 * into model's, clipped to max_norm, and AdamW's step on threads threads.
 * The pieces take four passes over the gradients: the sum (on the threads),
 * the norm (on one: each parameter's squares_sum, added in order), the
 * scaling (on one) and AdamW (on the threads). Here each thread sums whole
 * parameters and takes their squares_sum while they are in its cache; the
 * sums of squares are added in parameter order; and each thread scales its
 * part before AdamW: the same numbers in the same order, the same bits. */
void language_update(LanguageModel *model, Adam *adam, const float *weights, double max_norm,
                     int threads);

#endif
