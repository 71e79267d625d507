"""Pre-tokenizer patterns: the regexes that cut text into pieces BPE never merges across."""

#: GPT-2's pattern, as tiktoken writes it (the default of a rank file or a GPT-2 pair, which
#: carry no pattern of their own).
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""

#: GPT-4's (``cl100k_base``) pattern: case-insensitive contractions, digits in groups of three.
#: tiktoken writes the digit groups ``\p{N}{1,3}+``; here they are ``\p{N}{1,3}``, which cuts
#: the same in tiktoken but means the same in Hugging Face's Oniguruma too, where ``{1,3}+`` is
#: "one or more groups of one to three" rather than possessive.
GPT4_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

#: The pattern every trainer uses unless told otherwise (``prepare``, ``tokenizer train``, ``bpe
#: train``, their APIs): GPT-4's. It is published and read alike by tiktoken and Hugging Face,
#: tuned on no corpus of this project, and cuts better than GPT-2's: digits in groups of three (no
#: token for one long number), case-insensitive contractions, newlines kept apart from words; and
#: tokpack's exact trainer splits it in compiled code.
DEFAULT_PATTERN = GPT4_PATTERN

#: The one special token of a byte-level vocabulary; corpus text never produces it.
END_OF_TEXT = "<|endoftext|>"
