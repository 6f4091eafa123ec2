"""Helpers every floor may use, owning no idea of the tool's own.

proc.py     the one way a subprocess is run (echoed, captured, typed errors, no orphans)
files.py    whole-file writes, never through a planted link; a full disk is a sentence
masking.py  token-shaped strings masked before any text reaches a log, the store or a page
console.py  the one rich Console, and tables that do not wrap off a terminal
words.py    counts, sizes, signals and a command's last words, said one way
runlock.py  one run at a time per store and per workdir
gpus.py     the host's GPUs as nvidia-smi tells them, and CUDA_VISIBLE_DEVICES
"""
