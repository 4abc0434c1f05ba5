#!/usr/bin/env python3
"""Write the model fuzz target's seeds and hand-made regression inputs.

Each input is a saved model directory joined into one file: the files that
lookup_save_training writes, in the order of model_fuzz_file_names
(tests/fuzz/model_promises.c), separated by "@@next file@@"; an empty
chunk is a missing file. The seeds are real models saved by
`05_multihead/train --steps 3 ... --to DIR` at the smallest sizes it
accepts; the regressions are seeds with one thing changed at an edge.

Run from anywhere after `make`:  python3 tests/fuzz/make_model_seeds.py
"""
import os
import subprocess
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
TRAIN = os.path.join(ROOT, "05_multihead", "train")
SEEDS = os.path.join(HERE, "model_seeds")
REGRESSIONS = os.path.join(HERE, "regressions", "model")
SEPARATOR = b"@@next file@@"

MODEL = ["embed_keys.weight", "embed_values.weight", "attention.in_proj_weight",
         "attention.in_proj_bias", "attention.out_proj.weight", "attention.out_proj.bias",
         "readout.weight", "readout.bias"]
NAMES = MODEL + ["num_heads"]
for name in MODEL:
    NAMES += ["optimizer.exp_avg." + name, "optimizer.exp_avg_sq." + name]
NAMES += ["optimizer.step", "optimizer.lr", "training"]
assert len(NAMES) == 28


def saved_model(countries, hiddens, heads):
    """The files of a model trained 3 steps at these sizes: {name: bytes}."""
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([TRAIN, "--steps", "3", "--countries", str(countries), "--pairs", "2",
                        "--hiddens", str(hiddens), "--heads", str(heads), "--batch", "1",
                        "--examples", "1", "--to", folder],
                       check=True, stdout=subprocess.DEVNULL)
        files = {}
        for name in NAMES:
            with open(os.path.join(folder, name + ".npy"), "rb") as f:
                files[name] = f.read()
        return files


def npy_bytes(array):
    with tempfile.TemporaryFile() as f:
        np.save(f, array)
        f.seek(0)
        return f.read()


def write(folder, name, files):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(SEPARATOR.join(files.get(n, b"") for n in NAMES))


def main():
    small = saved_model(2, 2, 2)   # the fuzz target's fixed sizes
    write(SEEDS, "v2_d2_h2", small)
    write(SEEDS, "v2_d1_h1", saved_model(2, 1, 1))
    write(SEEDS, "v3_d4_h2", saved_model(3, 4, 2))
    write(SEEDS, "no_training_state", {n: small[n] for n in NAMES[:9]})

    # the edges, each a seed with one change; tests/test_fuzz.c expects
    # each one's verdict
    edges = {
        "missing_num_heads": {**small, "num_heads": b""},
        "vocabulary_of_zero": {**small, "embed_keys.weight":
                               npy_bytes(np.zeros((0, 2), dtype="<f4"))},
        "heads_do_not_divide_hiddens": {**small, "num_heads":
                                        npy_bytes(np.array([3], dtype="<i4"))},
        "batch_of_zero": {**small, "training":
                          npy_bytes(np.array([0, 2, 0, 0, 0, 0], dtype="<i4"))},
        "readout_as_directory": {**small, "readout.weight": b"D"},
        "lr_as_named_pipe": {**small, "optimizer.lr": b"P"},
        "step_as_broken_link": {**small, "optimizer.step": b"L"},
    }
    for name, files in edges.items():
        write(REGRESSIONS, name, files)


if __name__ == "__main__":
    main()
