"""The compiled encoder cuts a piece that misses its cache where no token can span the boundary,
and encodes the parts alone: the ids stay tiktoken's, for the real vocabularies on CJK and mixed
text, and for small random vocabularies whose tokens begin and end inside characters (the cuts a
careless rule would get wrong) and whose tokens the merges cannot always reach."""

from __future__ import annotations

import gzip
from importlib import resources

import numpy as np
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_files import read_ranks

from tokpack import GPT2_PATTERN
from tokpack.vocab.compiled import CACHE_BYTES, CompiledBpe
from tokpack.vocab.pattern_scanners import split
from tokpack.vocab.patterns import CL100K_PATTERN


def _encoders(ranks: dict[bytes, int], pattern: str) -> tuple[CompiledBpe, tiktoken.Encoding]:
    return (CompiledBpe(ranks, pattern),
            tiktoken.Encoding(name="oracle", pat_str=pattern, mergeable_ranks=ranks, special_tokens={}))


Real = tuple[CompiledBpe, tiktoken.Encoding, dict[bytes, int], str]


@pytest.fixture(scope="session", params=["gpt2", "cl100k"])
def real(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Real:
    """A real vocabulary's compiled encoder, its tiktoken oracle, its ranks and its pattern."""
    if request.param == "gpt2":
        from registry import gpt2_rank_file

        try:
            path = gpt2_rank_file()
        except RuntimeError as error:
            pytest.skip(str(error))
        pattern = GPT2_PATTERN
    else:
        packed = resources.files("bpe_openai.data").joinpath("cl100k_base.tiktoken.gz").read_bytes()
        path = tmp_path_factory.mktemp("cl100k") / "cl100k_base.tiktoken"
        path.write_bytes(gzip.decompress(packed))
        pattern = CL100K_PATTERN
    ranks = read_ranks(path)
    return (*_encoders(ranks, pattern), ranks, pattern)


#: Han, kana, Hangul, Polish and Latin letters, CJK punctuation, emoji and a few spaces: long
#: letter runs without spaces (the pieces that get cut) with every kind of neighbour.
CJK = list("的一是不了人我在有他这中大来上们为个国说到时要就出会可也你对生能而子那得于着下自之年过发后作里用道行所然家种事成方多经么去法学如都同现当没动面起看定天分还进好小部其些主样理心她本前开但因只从想实日军者意无力它与长把机十民第公此已工使情明性知全三又关点正业外将两高间由问很最重并物手应战向头文体政美相见被利什二等产或新己制身果加西斯月话合回特代内信表化老给世位次度门任常先海通教儿原东声提立及比员解水名真论处走义各入几口认条平系气题活尔更别打女变四神总何电数安少报才结反受目太量再感建务做接必场件计管期市直德资命山金指克许统区保至队形社便空决治展马科司五基眼书非则听白却界达光放强即像难且权思王象完设式色路记南品住告类求据程北边死张该交规万取拉格望觉术领共确传师观清今切院让识候带导争运笑飞风步改收根干造言联持组每济车亲极林服快办议往元英士证近失转夫令准布始怎呢存未远叫台单影具罗字爱击流备兵连调深商算质团集百需价花党华城石级整府离况亚请技际约示复病息究线似官火断精满支视消越器容照须九增研写称企八功吗包片史委乎查轻易早曾除农找装广显吧阿李标谈吃图念六引历首医局突专费号尽另周较注语仅考落青随选列武红响虽推势参希古众构房半节土投某案黑维革划敌致陈律足态护七兴派孩验责营星够章音跟志底站严巴例防族供效续施留讲型料终答紧黄绝奇察母京段依批群项故按河米围江织害斗双境客纪采举杀攻父苏密低朝友诉止细愿千值仍男钱破网热助倒育属坐帝限船脸职速刻乐否刚威毛状率甚独球般普怕弹校苦创假久错承印晚兰试股拿脑预谁益阳若哪微尼继送急血惊伤素药适波夜省初喜卫源食险待述陆习置居劳财环排福纳欢雷警获模充负云停木游龙树疑层冷洲冲射略范竟句室异激汉村哈策演简卡罪判担州静退既衣您宗积余痛检差富灵协角占配征修皮挥胜降阶审沉坚善妈刘读啊超免压银买皇养伊怀执副乱抗犯追帮宣佛岁航优怪香著田铁控税左右份穷"
          "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんがぎぐげござじずぜぞだでどばびぶべぼぱっゃゅょアイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワヲンー"
          "한국어의가는을를이다하고에서로으게지기한는데"
          "zażółćgęśląjaźńabcdefghijklmnopqrstuvwxyzABCXYZ"
          "，。、！？「」『』（）：；…—"
          "😀🇵🇱🎉") + [" ", " ", "\n", "1", "2"]
MIXED = st.text(st.sampled_from(CJK), min_size=1, max_size=120)


@settings(max_examples=400, deadline=None)
@given(text=MIXED)
def test_cjk_and_mixed_text_equal_tiktoken(real: Real, text: str) -> None:
    ours, oracle, _, _ = real
    assert ours.encode([text])[0].tolist() == oracle.encode_ordinary(text)


def test_cut_parts_are_encoded_and_cached(real: Real) -> None:
    _, oracle, ranks, pattern = real
    encoder = CompiledBpe(ranks, pattern)  # fresh caches
    texts = ["我们在这里讨论的问题是中国经济发展的前景如何以及人们对此有什么看法" * 3,
             "日本語のテキストはスペースなしで長く続きますのでこれは一つの片になります"]
    for _ in range(2):  # the second time, the parts of the long (uncached) pieces are cache hits
        got = encoder.encode(texts)
        assert [ids.tolist() for ids in got] == [oracle.encode_ordinary(text) for text in texts]
    with encoder.cache() as cache:
        stats = cache.stats()  # type: ignore[attr-defined]
    # each long piece was cut into many parts (tokens, or merged once and hits the second time)
    assert stats["uncached"] == 2 * len(texts) and stats["parts"] > 40 and stats["part_hits"] > 0
    assert encoder.cache_report().bytes_each == CACHE_BYTES == stats["bytes"]


def test_a_part_that_is_a_token_the_merges_cannot_reach_gets_the_merges_ids() -> None:
    # "abcd" is a token, but merging its bytes stops at a|bc|d ("bc" ranks first and nothing
    # joins it): alone, the piece "abcd" is that token (tiktoken's shortcut); as a part of
    # " abcd中abcd", cut around 中, it is a, bc, d.
    ranks = {bytes([b]): b for b in range(256)} | {b"bc": 256, b"ab": 257, b"cd": 258, b"abcd": 259}
    ours, oracle = _encoders(ranks, GPT2_PATTERN)
    han = list("中".encode())
    # first, from a new cache
    assert ours.encode(["abcd中abcd"])[0].tolist() == [ord("a"), 256, ord("d")] + han + [ord("a"), 256, ord("d")]
    texts = ["abcd abcd中abcd", "abcd中abcd abcd", "abcd"]
    for _ in range(2):  # the second time from the cache
        assert [ids.tolist() for ids in ours.encode(texts)] == [oracle.encode_ordinary(text) for text in texts]
    assert ours.encode(["abcd中abcd"])[0].tolist() == [ord("a"), 256, ord("d")] + han + [ord("a"), 256, ord("d")]


def test_a_piece_that_is_a_token_is_found_among_the_tokens_at_once(real: Real) -> None:
    _, oracle, ranks, pattern = real
    encoder = CompiledBpe(ranks, pattern)  # fresh caches
    text = (" the of and to in is that for it was on with as be at by this had not are but from or have an they"
            " which one you were all we her she there would their; każdy żółty kot")
    pieces = split(text, pattern)
    tokens = [piece for piece in pieces if piece.encode() in ranks]  # (a piece of one byte is its rank)
    assert [ids.tolist() for ids in encoder.encode([text])] == [oracle.encode_ordinary(text)]
    report = encoder.cache_report()
    # every piece is new to the text: those that are tokens are found in the vocabulary's table,
    # the others are merged (and kept)
    assert report.tokens == len(tokens) > 20 and report.hits + report.misses + report.uncached == len(pieces) - len(tokens)


#: Characters of 1 to 4 UTF-8 bytes, sharing bytes (so random byte spans make tokens that begin
#: and end inside characters, and that match in more than one place).
SMALL = list("aé中😀ą中文ðb") + [" "]


@st.composite
def vocabulary_and_texts(draw: st.DrawFn) -> tuple[dict[bytes, int], list[str]]:
    source = draw(st.text(st.sampled_from(SMALL), min_size=2, max_size=30)).encode()
    spans = draw(st.lists(st.tuples(st.integers(0, len(source)), st.integers(2, 12)), max_size=40))
    ranks = {bytes([b]): b for b in range(256)}
    for start, size in spans:
        token = source[start:start + size]
        if len(token) >= 2 and token not in ranks:
            ranks[token] = len(ranks)
    texts = draw(st.lists(st.text(st.sampled_from(SMALL), max_size=40), min_size=1, max_size=4))
    return ranks, texts + [source.decode()]


@settings(max_examples=150, deadline=None)
@given(case=vocabulary_and_texts())
def test_random_vocabularies_with_tokens_inside_characters_equal_tiktoken(
        case: tuple[dict[bytes, int], list[str]]) -> None:
    ranks, texts = case
    ours, oracle = _encoders(ranks, GPT2_PATTERN)
    assert [ids.tolist() for ids in ours.encode(texts)] == [oracle.encode_ordinary(text) for text in texts]
    # again, with the cache filled by the first pass (hits of whole pieces and of parts)
    assert [ids.tolist() for ids in ours.encode(texts[::-1])] == [oracle.encode_ordinary(t) for t in texts[::-1]]


def test_a_token_that_begins_inside_a_character_forbids_the_cut() -> None:
    # The token is the last byte of "é" then "a": no whole pair of characters, yet it spans é|a
    # (the Han character makes the piece one the encoder tries to cut).
    tail_of_e = "é".encode()[1:]
    ranks = {bytes([b]): b for b in range(256)} | {tail_of_e + b"a": 256}
    ours, oracle = _encoders(ranks, GPT2_PATTERN)
    text = "éaéaéa中"
    assert ours.encode([text])[0].tolist() == oracle.encode_ordinary(text) == [0xC3, 256] * 3 + list("中".encode())
    assert np.array_equal(ours.encode(["é"])[0], [0xC3, 0xA9])


def test_a_long_token_the_merges_cannot_reach_is_a_whole_piece_s_id() -> None:
    # "abcdefghi" merges to a|bc|de|fg|hi and no further; tiktoken takes the piece "abcdefghi"
    # whole, and so must the encoder; cut off around a Han character it is merged.
    ranks = {bytes([b]): b for b in range(256)} | {b"bc": 256, b"de": 257, b"fg": 258, b"hi": 259,
                                                   b"abcdefghi": 260}
    ours, oracle = _encoders(ranks, GPT2_PATTERN)
    texts = ["abcdefghi", "abcdefghi abcdefghi", "abcdefghi中abcdefghi", "xabcdefghi"]
    expected = [oracle.encode_ordinary(text) for text in texts]
    assert expected[0] == [260] and expected[2][0] != 260  # as parts of a cut piece, merged
    for _ in range(2):  # the second time from the cache
        assert [ids.tolist() for ids in ours.encode(texts)] == expected


def test_every_token_of_a_real_vocabulary_is_found_by_its_bytes(real: Real) -> None:
    # merging a published token's bytes ends with a look-up of all of them (every one is reachable),
    # which must find it past the short tokens' filter and in the table, at every length
    encoder, _, ranks, _ = real
    cache = encoder.new_cache()
    wrong = [(token, rank) for token, rank in ranks.items()
             if len(token) > 1 and np.frombuffer(encoder.encoder.merge(token, cache), dtype=np.uint32).tolist() != [rank]]
    assert wrong == [] and max(map(len, ranks)) > 15


def test_the_short_tokens_tables_take_under_thirty_bytes_a_token(real: Real) -> None:
    # the short tokens sit in buckets of one cache line, four fifths full, so that a merge's look-ups
    # find them nearer the core than in a sparser table
    encoder = real[0].encoder
    assert encoder.table_bytes < 30 * encoder.n_tokens


@pytest.mark.parametrize("seed", range(6))
def test_tokens_around_the_one_word_key_s_length_are_found_in_crowded_buckets(seed: int) -> None:
    # tokens of 6 to 9 bytes on both sides of the one-word keys' limit (7 bytes), and of up to 15, in
    # tables of few buckets: full buckets go on in the next, the last in the first
    rng = np.random.default_rng(seed)
    ranks = {bytes([b]): b for b in range(256)}
    words = ["".join(rng.choice(list("abcdefgh"), size=int(length))) for length in rng.integers(2, 16, size=400)]
    for word in words:
        for token in (word.encode(), f" {word}".encode()):
            if len(token) <= 15 and rng.random() < 0.7:
                ranks.setdefault(token, len(ranks))
    lengths = {len(token) for token in ranks}
    assert {6, 7, 8, 9} <= lengths
    ours, oracle = _encoders(ranks, GPT2_PATTERN)
    texts = [" ".join(words), *(token.decode() for token in ranks if len(token) > 1)]  # each token whole too
    expected = [oracle.encode_ordinary(text) for text in texts]
    for _ in range(2):  # merged and looked up, then from the cache
        assert [ids.tolist() for ids in ours.encode(texts)] == expected
