"""Parity of sjd's tiktoken engine with `tiktoken` on the real Qwen vocabulary (Emu3's text tokenizer).

A few thousand varied strings (test_tokenizer_parity.py's generator, with Qwen's special tokens among
them) encoded by `sjd tokenize` and by tiktoken must give identical ids. The vocabulary comes from the
shared data folder; where that is absent the whole file is skipped, and CTest reports it skipped.
"""
import base64
import unicodedata

import pytest
import tiktoken

from test_tokenizer_parity import SOURCE_DIR, compare, sjd_binary, sjd_encode, varied_strings  # noqa: F401

QWEN_VOCABULARY = SOURCE_DIR.parent / "shared" / "data" / "tokenizers" / "qwen" / "qwen.tiktoken"
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN_SPECIALS = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    **{f"<|extra_{i}|>": 151646 + i for i in range(205)},
}

if not QWEN_VOCABULARY.is_file():
    pytest.skip(f"{QWEN_VOCABULARY} is absent (the shared data folder is not on this machine)", allow_module_level=True)


def test_tiktoken_matches_tiktoken_with_qwen_vocabulary(sjd_binary, tmp_path):  # noqa: F811
    ranks = {}
    for line in QWEN_VOCABULARY.read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    encoding = tiktoken.Encoding("qwen", pat_str=QWEN_PATTERN, mergeable_ranks=ranks, special_tokens=QWEN_SPECIALS)
    extras = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|extra_0|>", "<|extra_204|>", "<|extra_205|>", "<|im"]
    strings = varied_strings(20, extras)
    # Qwen's tokenizer NFC-normalises before tiktoken, and allows every special token.
    reference = [encoding.encode(unicodedata.normalize("NFC", s), allowed_special="all") for s in strings]
    ours = sjd_encode(sjd_binary, tmp_path, QWEN_VOCABULARY, "tiktoken", strings, options={"qwen_specials": True})
    compare(strings, ours, reference, "qwen tiktoken")
