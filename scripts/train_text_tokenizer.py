#!/usr/bin/env python3
"""Trains the default model's text tokenizer and fixes the whole model vocabulary.

  scripts/train_text_tokenizer.py --out-dir work/text [--seed 0] [--captions 20000]

A byte-level BPE (HF `tokenizers`) trained on scenes.py training captions and the
prompt template, written as `tokenizer.json` in the layout of Chameleon's: one
vocabulary for the whole model, special tokens first under Chameleon's names
(`<s>`, `<pad>`, `</s>`, `<unk>`), then the image tokens `IMGIMG<letters>Z`
(codebook index in decimal with A..J for 0..9), the image structure tokens
(`<eoss>` end of image, `<racm3:break>` begin of image, `<reserved08706>` end of
turn, `<reserved08799>` newline, `<reserved08800+n>` the size token of n*32 pixels),
and after them the text tokens. `vocabulary.json` records the layout (ids of every
named token) for the transformer's training and export.

The trainer is deterministic: the same captions give the same merges.
"""
import argparse
import json
import os
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenes  # noqa: E402

CODEBOOK_SIZE = 512
# <reserved08800>..<reserved08832>: 0..1024 pixels in steps of 32, as in Lumina-mGPT's vocabulary
# (its exporter checks the size tokens of every Lumina resolution up to 1024).
SIZE_TOKENS = 33
SIZE_UNIT_PX = 32
TOTAL_VOCAB = 1024  # rows of the embedding and output head; ids past the tokenizer's are unused
PROMPT_TEMPLATE = "Generate an image of {width}x{height} according to the following prompt:\n{prompt}"
LEADING_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]
END_IMAGE, BEGIN_IMAGE, END_OF_TURN, NEWLINE = "<eoss>", "<racm3:break>", "<reserved08706>", "<reserved08799>"


def image_token_name(code):
    """Chameleon's image token name: the code's decimal digits written with A..J."""
    return "IMGIMG" + "".join("ABCDEFGHIJ"[int(d)] for d in str(code)) + "Z"


def size_token_name(n):
    return f"<reserved{8800 + n:05d}>"


def structure_tokens():
    """Every non-text token, in id order from 0."""
    names = list(LEADING_SPECIALS)
    names += [image_token_name(code) for code in range(CODEBOOK_SIZE)]
    names += [END_IMAGE, BEGIN_IMAGE, END_OF_TURN, NEWLINE]
    names += [size_token_name(n) for n in range(SIZE_TOKENS)]
    return names


def training_texts(seed, count):
    side = str(scenes.IMAGE_SIZE)
    template = PROMPT_TEMPLATE.format(width=side, height=side, prompt="")
    # The template is part of every prompt; repeating it lets BPE merge it into few tokens.
    return [scenes.scene(seed, "train", i)["caption"] for i in range(count)] + [template] * (count // 4)


def train_text_bpe(texts, text_vocab):
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=text_vocab, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return json.loads(tokenizer.to_str())


def tokenizer_json(trained):
    """The trained text BPE moved behind the structure tokens, as one tokenizer.json."""
    specials = structure_tokens()
    offset = len(specials)
    text_vocab = trained["model"]["vocab"]
    vocab = {name: i for i, name in enumerate(specials)}
    for token, i in sorted(text_vocab.items(), key=lambda item: item[1]):
        vocab[token] = offset + i
    if len(vocab) != offset + len(text_vocab):
        raise ValueError("tokenizer: a text token has the name of a structure token")
    image_ids = set(range(len(LEADING_SPECIALS), len(LEADING_SPECIALS) + CODEBOOK_SIZE))
    added = [{"id": i, "content": name, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True}
             for i, name in enumerate(specials) if i not in image_ids]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": trained["model"]["merges"]},
    }


def vocabulary_layout(vocab_size_used):
    """The ids the model's layout needs, by role."""
    ids = {name: i for i, name in enumerate(structure_tokens())}
    return {
        "vocab_size": TOTAL_VOCAB,
        "tokenizer_size": vocab_size_used,
        "bos_id": ids["<s>"],
        "image_token_first": ids[image_token_name(0)],
        "codebook_size": CODEBOOK_SIZE,
        "end_image_id": ids[END_IMAGE],
        "begin_image_id": ids[BEGIN_IMAGE],
        "end_of_turn_id": ids[END_OF_TURN],
        "newline_id": ids[NEWLINE],
        "size_token_base": ids[size_token_name(0)],
        "size_token_unit_px": SIZE_UNIT_PX,
        "prompt_template": PROMPT_TEMPLATE,
    }


def load(out_dir):
    """(tokenizers.Tokenizer, layout dict) written by this script."""
    tokenizer = Tokenizer.from_file(os.path.join(out_dir, "tokenizer.json"))
    with open(os.path.join(out_dir, "vocabulary.json"), encoding="utf-8") as f:
        return tokenizer, json.load(f)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--captions", type=int, default=20000, help="training captions to learn merges from")
    args = parser.parse_args(argv)

    text_vocab = TOTAL_VOCAB - len(structure_tokens())
    trained = train_text_bpe(training_texts(args.seed, args.captions), text_vocab)
    data = tokenizer_json(trained)
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "tokenizer.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(data, f, ensure_ascii=False, indent=1)
        f.write("\n")
    layout = vocabulary_layout(len(data["model"]["vocab"]))
    with open(os.path.join(args.out_dir, "vocabulary.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(layout, f, indent=2)
        f.write("\n")
    tokenizer, _ = load(args.out_dir)
    sample = scenes.scene(args.seed, "eval", 0)["caption"]
    print(f"tokenizer: {len(data['model']['vocab'])} tokens ({len(trained['model']['vocab'])} text), "
          f"{len(data['model']['merges'])} merges; {sample!r} -> {len(tokenizer.encode(sample).ids)} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
