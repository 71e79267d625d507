"""The BPE lab: one self-contained page where the exact rules run in the browser.

The page carries only its starting corpus (or a challenge); the rules themselves are the small
JavaScript functions ``countPairs``, ``selectPair`` and ``mergePair`` below, a line-for-line
translation of :mod:`tokpack.bpe.reference`. The learner edits the corpus or loads a
``challenge.json``, steps merge by merge, can hide the counts until they have predicted the
winner, and can write a ``proof.json`` for a loaded challenge or check one, with the verdict
``tokpack bpe verify`` gives. No server, no network.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokpack.bpe.records import Challenge
from tokpack.errors import InputError
from tokpack.report.page import page

#: Pairs listed per step: the winner and its closest rivals are all a learner needs to check.
COUNTS_SHOWN = 8

# The rules, then the page. Ids are packed as left * 2**24 + right, so comparing two keys
# compares the pairs (left id first): the tie rule is "the smallest key".
_RULES = r"""
const PAIR_BASE = 16777216;
const pairKey = (left, right) => left * PAIR_BASE + right;
const keyPair = (key) => [Math.floor(key / PAIR_BASE), key % PAIR_BASE];

// Count adjacent pairs inside each document (overlaps count: aaaa holds (97, 97) three times).
function countPairs(docs) {
  const counts = new Map();
  for (const doc of docs) {
    for (let i = 0; i + 1 < doc.length; i++) {
      const key = pairKey(doc[i], doc[i + 1]);
      counts.set(key, (counts.get(key) || 0) + 1);
    }
  }
  return counts;
}

// The highest count wins; on a tie, the smallest pair (left id, then right id).
function selectPair(counts) {
  let best = null;
  for (const [key, count] of counts) {
    const bestCount = best === null ? 0 : counts.get(best);
    if (count > bestCount || (count === bestCount && key < best)) best = key;
  }
  return keyPair(best);
}

// Replace the pair left to right, never reusing a position: aaa becomes [new, a].
function mergePair(docs, pair, newId) {
  return docs.map((doc) => {
    const merged = [];
    for (let i = 0; i < doc.length; i++) {
      if (i + 1 < doc.length && doc[i] === pair[0] && doc[i + 1] === pair[1]) { merged.push(newId); i++; }
      else merged.push(doc[i]);
    }
    return merged;
  });
}

// Up to numMerges merges; each row as in proof.json (frequency: the count before the merge).
function train(texts, numMerges) {
  const encoder = new TextEncoder();
  let docs = texts.map((text) => Array.from(encoder.encode(text)));
  const rows = [];
  for (let step = 0; step < numMerges; step++) {
    const counts = countPairs(docs);
    if (counts.size === 0) break;
    const pair = selectPair(counts);
    rows.push({left_id: pair[0], right_id: pair[1], result_id: 256 + step, frequency: counts.get(pairKey(...pair))});
    docs = mergePair(docs, pair, 256 + step);
  }
  return rows;
}
"""

_SCRIPT = r"""
const start = JSON.parse(document.getElementById('report-data').textContent);
const $ = (id) => document.getElementById(id);
const pairText = (p) => '(' + p[0] + ', ' + p[1] + ')';
const plural = (n, word) => n + ' ' + word + (n === 1 ? '' : 's');
const VISIBLE = {' ': '␣', '\n': '⏎', '\t': '⇥', '\r': '␍'};
let lab;  // {texts, numMerges, challenge, history: [docs before step 1, after 1, ...], rows, spelled}
let current = 0;

function reset(texts, numMerges, challenge) {
  const encoder = new TextEncoder();
  lab = {texts, numMerges, challenge, rows: [], spelled: new Map(),
         history: [texts.map((t) => Array.from(encoder.encode(t)))]};
  for (let b = 0; b < 256; b++) lab.spelled.set(b, [b]);
  while (advance()) { /* every step up front, so that previous and next are instant */ }
  current = 0;
  $('corpus').value = texts.join('\n');
  $('merges').value = numMerges;
  $('challenge-status').textContent = challenge
    ? 'Challenge ' + challenge.challenge_id + ': ' + plural(texts.length, 'document') + ', ' + plural(numMerges, 'merge') + '.'
    : 'Your own corpus: one document per line.';
  $('make-proof').disabled = !challenge;
  render();
}

// Compute the step after the last one, if the rules still find a pair.
function advance() {
  const docs = lab.history[lab.history.length - 1];
  const step = lab.rows.length;
  if (step >= lab.numMerges) return false;
  const counts = countPairs(docs);
  if (counts.size === 0) return false;
  const pair = selectPair(counts);
  lab.rows.push({left_id: pair[0], right_id: pair[1], result_id: 256 + step, frequency: counts.get(pairKey(...pair))});
  lab.spelled.set(256 + step, lab.spelled.get(pair[0]).concat(lab.spelled.get(pair[1])));
  lab.history.push(mergePair(docs, pair, 256 + step));
  return true;
}

function tokenText(id) {
  try {
    const text = new TextDecoder('utf-8', {fatal: true}).decode(new Uint8Array(lab.spelled.get(id)));
    return Array.from(text).map((c) => VISIBLE[c] || c).join('');
  } catch (error) { return null; }
}

function chip(id, cls) {
  const el = document.createElement('span');
  el.className = 'chip' + (id >= 256 ? ' merged' : '') + (cls ? ' ' + cls : '');
  el.dataset.id = id;
  el.title = 'id ' + id;
  const b = document.createElement('b');
  const text = tokenText(id);
  b.textContent = text === null ? '#' + id : text;
  const small = document.createElement('small');
  small.textContent = id;
  el.append(b, small);
  return el;
}

function row(doc, marks, cls) {
  const line = document.createElement('div');
  line.className = 'doc';
  doc.forEach((id, i) => line.appendChild(chip(id, marks.has(i) ? cls : '')));
  return line;
}

// Positions the merge replaces: the same left-to-right scan as mergePair.
function replacedIn(doc, pair) {
  const found = [];
  for (let i = 0; i + 1 < doc.length; i++) if (doc[i] === pair[0] && doc[i + 1] === pair[1]) { found.push(i); i++; }
  return found;
}

function ranked(counts) {
  return Array.from(counts, ([key, count]) => ({pair: keyPair(key), key, count}))
    .sort((a, b) => b.count - a.count || a.key - b.key);
}

function render() {
  const more = current < lab.rows.length;
  const before = $('before'); before.innerHTML = '';
  const after = $('after'); after.innerHTML = '';
  const tbody = $('counts').querySelector('tbody'); tbody.innerHTML = '';
  $('verdict').textContent = '';
  $('prev').disabled = current === 0;
  $('next').disabled = !more;
  const hidden = $('predict').checked;
  $('counts-panel').hidden = hidden;
  $('after-panel').hidden = hidden;
  $('reveal').hidden = !hidden || !more;
  if (!more) {
    $('position').textContent = 'Done: ' + plural(lab.rows.length, 'merge');
    lab.history[current].forEach((doc) => before.appendChild(row(doc, new Set(), '')));
    $('rule').textContent = lab.rows.length < lab.numMerges ? 'No pair is left: training stops here.' : 'The merges asked for are done.';
    $('counts-panel').hidden = true;
    $('after-panel').hidden = true;
    return;
  }
  const docs = lab.history[current];
  const rowNow = lab.rows[current];
  const winner = [rowNow.left_id, rowNow.right_id];
  $('position').textContent = 'Step ' + (current + 1) + ' of ' + lab.rows.length;
  const replaced = docs.map((doc) => replacedIn(doc, winner));
  docs.forEach((doc, d) => {
    const marks = new Set();
    if (!hidden) replaced[d].forEach((i) => { marks.add(i); marks.add(i + 1); });
    before.appendChild(row(doc, marks, 'replaced'));
  });
  lab.history[current + 1].forEach((doc, d) => {
    const marks = new Set(); replaced[d].forEach((i, k) => marks.add(i - k));
    after.appendChild(row(doc, marks, 'new'));
  });
  const list = ranked(countPairs(docs));
  list.slice(0, start.shown).forEach((c) => {
    const tr = document.createElement('tr');
    const win = c.pair[0] === winner[0] && c.pair[1] === winner[1];
    if (win) tr.className = 'winner';
    const spelled = (tokenText(c.pair[0]) ?? '#' + c.pair[0]) + ' + ' + (tokenText(c.pair[1]) ?? '#' + c.pair[1]);
    for (const cell of [pairText(c.pair), c.count, spelled + (win ? '  ← winner' : '')]) {
      const td = document.createElement('td'); td.textContent = cell; tr.appendChild(td);
    }
    tr.children[1].className = 'num';
    tbody.appendChild(tr);
  });
  const tied = list.filter((c) => c.count === rowNow.frequency).length;
  $('rule').textContent = hidden ? 'Counts hidden: name the pair you think wins.' :
    'Winner ' + pairText(winner) + ' with count ' + rowNow.frequency +
    (tied > 1 ? ' (a tie of ' + tied + ' pairs: the numerically smallest pair wins)' : ' (the highest count)') +
    '; it becomes id ' + rowNow.result_id + ' and replaces ' + plural(replaced.reduce((a, r) => a + r.length, 0), 'occurrence') +
    ', left to right, never reusing a position.';
}

// The verdict on a guessed pair, with the reason when it is wrong.
function judge(text) {
  if (current >= lab.rows.length) return 'Training is done: there is no next merge.';
  const m = text.match(/^\s*\(?\s*(\d+)\s*,\s*(\d+)\s*\)?\s*$/);
  if (!m) return 'Type a pair as two ids, like 97,98.';
  const p = [Number(m[1]), Number(m[2])];
  const w = lab.rows[current];
  const winner = [w.left_id, w.right_id];
  const count = countPairs(lab.history[current]).get(pairKey(...p)) || 0;
  if (p[0] === winner[0] && p[1] === winner[1]) return 'Yes: ' + pairText(p) + ' is the pair the rules pick (count ' + w.frequency + ').';
  if (count === 0) return 'No: ' + pairText(p) + ' does not occur in any document now, so its count is 0.';
  if (count < w.frequency) return 'No: ' + pairText(p) + ' occurs ' + count + ' times, fewer than ' + pairText(winner) + ' with ' + w.frequency + '.';
  return 'No: ' + pairText(p) + ' ties with ' + pairText(winner) + ' at ' + w.frequency + ', and on a tie the numerically smaller pair wins: ' + pairText(winner) + ' comes first.';
}

// ---- challenges and proofs, as tokpack bpe proof / verify ----
async function sha256Hex(text) {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}
// JSON.stringify is compact and keeps non-ASCII, as the checksum's json.dumps(ensure_ascii=False).
const corpusSha256 = (corpus) => sha256Hex(JSON.stringify(corpus));
const EXPIRY_FIELDS = ['expires_at', 'expires', 'valid_until', 'expiry'];

function expiry(challenge) {
  for (const name of EXPIRY_FIELDS) {
    const value = challenge[name];
    if (value === undefined || value === null) continue;
    const text = String(value).trim();
    if (/^\d{4}-\d{2}-\d{2}$/.test(text)) return new Date(Date.parse(text + 'T00:00:00Z') + 86400000);
    const zoned = /(Z|[+-]\d{2}:?\d{2})$/.test(text) ? text : text + 'Z';
    const moment = Date.parse(zoned);
    if (isNaN(moment)) throw new Error(name + ': ' + JSON.stringify(value) + ' is not an ISO-8601 date');
    return new Date(moment);
  }
  return null;
}

const isCount = (value, least) => Number.isInteger(value) && value >= least;

async function checkChallenge(challenge) {
  if (!challenge || typeof challenge.challenge_id !== 'string' || !challenge.challenge_id ||
      !Array.isArray(challenge.corpus) || !challenge.corpus.every((t) => typeof t === 'string') ||
      !isCount(challenge.num_merges, 0) || !/^[0-9a-fA-F]{64}$/.test(challenge.corpus_sha256 || '')) {
    throw new Error('not a challenge: it needs challenge_id, corpus (strings), num_merges and corpus_sha256');
  }
  const actual = await corpusSha256(challenge.corpus);
  if (actual !== challenge.corpus_sha256.toLowerCase()) {
    throw new Error('corpus_sha256 mismatch: the challenge records ' + challenge.corpus_sha256 + ', its corpus hashes to ' + actual);
  }
  const ends = expiry(challenge);
  if (ends !== null && Date.now() >= ends.getTime()) throw new Error('challenge ' + challenge.challenge_id + ' expired on ' + ends.toISOString());
}

function makeProof(challenge) {
  return {challenge_id: challenge.challenge_id, corpus_sha256: challenge.corpus_sha256.toLowerCase(),
          num_merges: challenge.num_merges, merges: train(challenge.corpus, challenge.num_merges),
          implementation: 'tokpack BPE lab (JavaScript reference rules)'};
}

const ROW_FIELDS = ['left_id', 'right_id', 'result_id', 'frequency'];
const PROOF_FIELDS = ['challenge_id', 'corpus_sha256', 'num_merges', 'merges', 'implementation'];

// {valid, step, message}: the verdict of tokpack bpe verify (step: the first row that differs).
async function verifyProof(proof, challenge) {
  await checkChallenge(challenge);
  const keys = proof && typeof proof === 'object' ? Object.keys(proof).sort() : [];
  if (keys.join() !== [...PROOF_FIELDS].sort().join() || !Array.isArray(proof.merges) ||
      !proof.merges.every((r) => r && Object.keys(r).sort().join() === [...ROW_FIELDS].sort().join() &&
        isCount(r.left_id, 0) && isCount(r.right_id, 0) && isCount(r.result_id, 256) && isCount(r.frequency, 1))) {
    throw new Error('not a proof: it needs exactly ' + PROOF_FIELDS.join(', ') + ', and rows of integer ' + ROW_FIELDS.join(', '));
  }
  for (const name of ['challenge_id', 'num_merges']) {
    if (proof[name] !== challenge[name]) return {valid: false, step: null, message: name + ': proof has ' + JSON.stringify(proof[name]) + ', challenge has ' + JSON.stringify(challenge[name])};
  }
  if (String(proof.corpus_sha256).toLowerCase() !== challenge.corpus_sha256.toLowerCase()) {
    return {valid: false, step: null, message: 'corpus_sha256: proof has ' + proof.corpus_sha256 + ', challenge has ' + challenge.corpus_sha256};
  }
  const expected = train(challenge.corpus, challenge.num_merges);
  const same = (a, b) => a && b && ROW_FIELDS.every((f) => a[f] === b[f]);
  for (let i = 0; i < Math.max(expected.length, proof.merges.length); i++) {
    const want = expected[i], got = proof.merges[i];
    if (same(want, got)) continue;
    const why = want && got ? 'the reference has ' + JSON.stringify(want) + ', the proof ' + JSON.stringify(got)
      : (want ? 'the proof stops early' : 'the proof has extra rows');
    return {valid: false, step: i + 1, message: 'divergence at step ' + (i + 1) + ': ' + why};
  }
  return {valid: true, step: null, message: 'valid: ' + expected.length + ' merges match the reference for challenge ' + challenge.challenge_id};
}

async function readJson(input) {
  const file = input.files[0];
  if (!file) throw new Error('choose a file first');
  try { return JSON.parse(await file.text()); }
  catch (error) { throw new Error(file.name + ': not JSON (' + error.message + ')'); }
}

$('load-challenge').addEventListener('change', async () => {
  try {
    const challenge = await readJson($('load-challenge'));
    await checkChallenge(challenge);
    reset(challenge.corpus, challenge.num_merges, challenge);
    $('proof-status').textContent = '';
  } catch (error) { $('challenge-status').textContent = 'Refused: ' + error.message; }
});
$('make-proof').addEventListener('click', () => {
  const proof = makeProof(lab.challenge);
  const link = document.createElement('a');
  link.href = URL.createObjectURL(new Blob([JSON.stringify(proof, null, 2) + '\n'], {type: 'application/json'}));
  link.download = 'proof.json';
  link.click();
  $('proof-status').textContent = 'proof.json: ' + plural(proof.merges.length, 'merge') + ' for challenge ' + proof.challenge_id + '.';
});
$('check-proof').addEventListener('change', async () => {
  try {
    if (!lab.challenge) throw new Error('load the challenge.json the proof answers first');
    const outcome = await verifyProof(await readJson($('check-proof')), lab.challenge);
    $('proof-status').textContent = outcome.message;
    $('proof-status').className = outcome.valid ? 'ok' : 'bad';
  } catch (error) { $('proof-status').textContent = 'Refused: ' + error.message; $('proof-status').className = 'bad'; }
});
$('apply').addEventListener('click', () => {
  const merges = Math.max(0, Math.floor(Number($('merges').value) || 0));
  reset($('corpus').value.split('\n'), merges, null);
});
$('next').addEventListener('click', () => { if (!$('next').disabled) { current++; render(); } });
$('prev').addEventListener('click', () => { if (current > 0) { current--; render(); } });
$('predict').addEventListener('change', render);
$('reveal').addEventListener('click', () => { $('predict').checked = false; render(); $('predict').checked = true; $('reveal').hidden = true; });
$('guess').addEventListener('submit', (e) => {
  e.preventDefault();
  const verdict = judge($('pair').value);
  if ($('predict').checked && !verdict.startsWith('Type')) $('reveal').click();  // the answer shows the counts
  $('verdict').textContent = verdict;
});
document.addEventListener('keydown', (e) => {
  if (['INPUT', 'TEXTAREA'].includes(e.target.tagName)) return;
  if (e.key === 'ArrowRight' || e.key === 'n') $('next').click();
  if (e.key === 'ArrowLeft' || e.key === 'p') $('prev').click();
});
window.bpe = {countPairs, selectPair, mergePair, train, makeProof, verifyProof, corpusSha256};
reset(start.texts, start.merges, start.challenge);
"""

_STYLE = """<style>
.controls { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; margin: .5rem 0; }
button, .file { font: inherit; padding: .35rem .8rem; border-radius: .3rem; border: 1px solid #999; background: #f4f6fa; cursor: pointer; }
button:focus-visible, input:focus-visible, textarea:focus-visible { outline: 3px solid #2f6fdb; outline-offset: 1px; }
button:disabled { opacity: .45; cursor: default; }
textarea { width: 100%; font-family: ui-monospace, monospace; font-size: .9rem; }
.doc { display: flex; flex-wrap: wrap; gap: .25rem; margin: .3rem 0; padding: .3rem; border-left: 3px solid #d9dde5; }
.chip { display: inline-flex; flex-direction: column; align-items: center; min-width: 1.8rem; padding: .1rem .3rem;
        border: 1px solid #c5cbd6; border-radius: .3rem; background: #fff; }
.chip b { font-family: ui-monospace, monospace; font-weight: 600; white-space: pre; } .chip small { color: #5b6475; font-size: .7rem; }
.chip.merged { background: #eef3ff; } .chip.replaced { background: #ffe9c7; border-color: #e08a00; }
.chip.new { background: #d9f5de; border-color: #1e7d32; }
tr.winner td { font-weight: 700; background: #d9f5de; }
#verdict { font-weight: 600; min-height: 1.5em; } #pair { font: inherit; width: 7rem; padding: .3rem; } #merges { width: 5rem; }
</style>"""

_BODY = """
<p>Each document is a row of tokens (the text where the bytes decode, the id below). The rules run in
this page: count adjacent pairs inside each document, pick the most frequent (a tie goes to the
numerically smallest pair), give it the next id, replace it left to right. Press <kbd>→</kbd> or
<i>next merge</i> to apply them one step at a time.</p>
<details><summary>Corpus, challenge and proof</summary>
<label for="corpus">Corpus, one document per line:</label>
<textarea id="corpus" rows="5" spellcheck="false"></textarea>
<div class="controls"><label for="merges">merges</label><input id="merges" type="number" min="0">
<button id="apply" type="button">train on this corpus</button></div>
<div class="controls"><label class="file">load challenge.json <input id="load-challenge" type="file" accept=".json,application/json" hidden></label>
<button id="make-proof" type="button">write proof.json</button>
<label class="file">check a proof.json <input id="check-proof" type="file" accept=".json,application/json" hidden></label></div>
<p id="proof-status" aria-live="polite"></p>
</details>
<p id="challenge-status" class="muted" aria-live="polite"></p>
<div class="controls"><button id="prev" type="button">← previous</button>
<button id="next" type="button">next merge →</button><span id="position" aria-live="polite"></span>
<label><input id="predict" type="checkbox"> predict first (hide the counts)</label>
<button id="reveal" type="button" hidden>reveal</button></div>
<form id="guess" class="controls"><label for="pair">Which pair merges next?</label>
<input id="pair" placeholder="97,98" autocomplete="off"><button type="submit">check</button></form>
<p id="verdict" aria-live="polite"></p>
<h2>Before this merge</h2><div id="before" data-testid="before"></div>
<div id="counts-panel"><h2>Pair counts</h2><table id="counts"><thead><tr><th>pair</th><th class="num">count</th><th>tokens</th></tr></thead>
<tbody></tbody></table></div><p id="rule"></p>
<div id="after-panel"><h2>After this merge</h2><div id="after" data-testid="after"></div></div>
"""


def explorer_page(texts: Sequence[str], num_merges: int, *, challenge: Challenge | None = None) -> str:
    """The lab, starting on ``texts`` with ``num_merges`` merges, or on ``challenge``, as one
    HTML file.

    Raises:
        InputError: no text and no challenge, or a negative ``num_merges``.
    """
    if challenge is not None:
        texts, num_merges = challenge.corpus, challenge.num_merges
    elif not texts:
        raise InputError("the explorer needs at least one text or a challenge")
    if num_merges < 0:
        raise InputError(f"num_merges must be 0 or more, got {num_merges}")
    data: dict[str, Any] = {
        "texts": list(texts), "merges": num_merges, "shown": COUNTS_SHOWN,
        "challenge": challenge.model_dump(mode="json") if challenge is not None else None,
    }
    return page("BPE lab", _STYLE + _BODY, data=data, script=_RULES + _SCRIPT)
