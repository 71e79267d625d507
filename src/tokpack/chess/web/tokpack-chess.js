// tokpack's chess encoders in the browser: the uci, san and bpe schemes, with no dependency.
// Each function takes the scheme's vocab.json (written by `tokpack chess export-web`) and returns
// the same ids as tokpack's Python encoders (tests/fixtures/chess_parity.json is the proof).

const RESULTS = ["1-0", "0-1", "1/2-1/2", "*"];

function idOf(vocab, token) {
  const id = vocab.tokens[token];
  return id === undefined ? vocab.tokens["<unk>"] : id;
}

function checkResult(result) {
  if (!RESULTS.includes(result)) throw new Error(`result ${JSON.stringify(result)} is not one of ${RESULTS.join(", ")}`);
}

// The Elo bin of a rating: 0 below the lowest edge, the last bin from the top edge, "missing" for null or <= 0.
export function eloToken(vocab, rating) {
  const elo = vocab.elo;
  if (rating === null || rating === undefined || rating <= 0) return elo.tokens[elo.n_bins];
  const index = Math.min(Math.max(Math.floor((rating - elo.lowest_edge) / elo.width) + 1, 0), elo.n_bins - 1);
  return elo.tokens[index];
}

// uci: <bos> white-Elo black-Elo moves... result <eos>; a move the table cannot spell is <unk>.
export function encodeUci(vocab, uci, whiteElo, blackElo, result) {
  checkResult(result);
  const moves = uci.split(" ").filter((m) => m.length > 0);
  return [vocab.tokens["<bos>"], idOf(vocab, eloToken(vocab, whiteElo)), idOf(vocab, eloToken(vocab, blackElo)),
          ...moves.map((m) => idOf(vocab, m)), vocab.tokens[result], vocab.tokens["<eos>"]];
}

// The numbered SAN movetext of a list of SAN moves: "1.e4 e5 2.Nf3".
export function sanText(moves) {
  return moves.map((m, ply) => (ply % 2 === 0 ? `${ply / 2 + 1}.${m}` : m)).join(" ");
}

// san: <bos> the characters of "1.e4 e5 2.Nf3 ... RESULT" <eos> (ratings are not encoded).
// `san` is the numbered movetext (a string) or the SAN moves (an array).
export function encodeSan(vocab, san, result) {
  checkResult(result);
  const movetext = Array.isArray(san) ? sanText(san) : san;
  const text = movetext.length ? `${movetext} ${result}` : result;
  return [vocab.tokens["<bos>"], ...Array.from(text, (c) => idOf(vocab, c)), vocab.tokens["<eos>"]];
}

// Byte-pair merges over one word, as Hugging Face tokenizers applies them: the pair of lowest rank
// first, the leftmost of equal ones, until no adjacent pair has a merge.
function bpeWord(word, ranks) {
  let symbols = Array.from(word);
  for (;;) {
    let best = -1, bestRank = Infinity;
    for (let i = 0; i + 1 < symbols.length; i++) {
      const rank = ranks.get(symbols[i] + "\u0000" + symbols[i + 1]);
      if (rank !== undefined && rank < bestRank) { best = i; bestRank = rank; }
    }
    if (best < 0) return symbols;
    symbols = [...symbols.slice(0, best), symbols[best] + symbols[best + 1], ...symbols.slice(best + 2)];
  }
}

const rankCache = new WeakMap();

// bpe: <bos> the BPE ids of the spaceless moves ("e2e4e7e5...") result <eos> (ratings not encoded).
// `tokenizer` is the scheme's tokenizer.json (parsed).
export function encodeBpe(tokenizer, uci, result) {
  checkResult(result);
  const model = tokenizer.model;
  let ranks = rankCache.get(tokenizer);
  if (!ranks) {
    ranks = new Map(model.merges.map((m, rank) => {
      const [a, b] = Array.isArray(m) ? m : m.split(" ");
      return [a + "\u0000" + b, rank];
    }));
    rankCache.set(tokenizer, ranks);
  }
  const word = uci.split(" ").join("");
  const unk = model.vocab[model.unk_token];
  const body = word.length ? bpeWord(word, ranks).map((s) => (s in model.vocab ? model.vocab[s] : unk)) : [];
  return [model.vocab["<bos>"], ...body, model.vocab[result], model.vocab["<eos>"]];
}
