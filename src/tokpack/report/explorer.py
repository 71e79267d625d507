"""The BPE explorer: one page that steps through the exact rules on a few documents.

Every step is computed here by the reference core (:mod:`tokpack.bpe.reference`) and embedded
as data; the page's script only shows it: the documents as rows of token chips, the pair counts
with the winner and the tie rule, the positions each merge replaces. It needs no server and no
network.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokpack.bpe.reference import count_pairs, merge_pair, select_pair
from tokpack.errors import InputError
from tokpack.report.page import escape, page
from tokpack.report.tokenizer import readable

#: Pairs listed per step: the winner and its closest rivals are all a learner needs to check.
COUNTS_SHOWN = 8


def _replaced_positions(doc: Sequence[int], pair: tuple[int, int]) -> list[int]:
    """Where ``pair`` is replaced in ``doc``, left to right without reusing a position.

    >>> _replaced_positions([97, 97, 97, 97], (97, 97))
    [0, 2]
    """
    positions, i = [], 0
    while i + 1 < len(doc):
        if (doc[i], doc[i + 1]) == pair:
            positions.append(i)
            i += 2
        else:
            i += 1
    return positions


def explorer_steps(texts: Sequence[str], num_merges: int) -> dict[str, Any]:
    """Every step of training on ``texts``: sequences before, counts, winner, replaced positions.

    >>> steps = explorer_steps(["abab", "abab", "baba", "aaaa"], 2)["steps"]
    >>> steps[0]["winner"], steps[0]["frequency"], steps[0]["replaced"][3]
    ([97, 98], 5, [])
    >>> steps[1]["winner"], steps[1]["frequency"], steps[1]["replaced"][3]
    ([97, 97], 3, [0, 2])
    """
    docs = [list(text.encode("utf-8")) for text in texts]
    spelled = {b: bytes([b]) for b in range(256)}
    steps = []
    for step in range(num_merges):
        counts = count_pairs(docs)
        if not counts:
            break
        winner = select_pair(counts)
        new_id = 256 + step
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        after = merge_pair(docs, winner, new_id)
        replaced = [_replaced_positions(doc, winner) for doc in docs]
        assert all(len(a) == len(d) - len(r) for a, d, r in zip(after, docs, replaced))  # same rule as the core
        spelled[new_id] = spelled[winner[0]] + spelled[winner[1]]
        steps.append({
            "step": step, "before": docs, "after": after, "winner": list(winner), "new_id": new_id,
            "frequency": counts[winner], "replaced": replaced,
            "counts": [{"pair": list(pair), "count": count} for pair, count in ranked],
        })
        docs = after
    present = {byte for text in texts for byte in text.encode("utf-8")}
    tokens = {str(i): {"text": _chip_text(token), "bytes": len(token)} for i, token in spelled.items()
              if i >= 256 or i in present}
    return {"texts": list(texts), "steps": steps, "final": docs, "tokens": tokens, "shown": COUNTS_SHOWN}


def _chip_text(token: bytes) -> str | None:
    """What a chip shows: the token as characters where it decodes, otherwise ``None`` (the id)."""
    try:
        token.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return readable(token)


_SCRIPT = r"""
const data = JSON.parse(document.getElementById('report-data').textContent);
let current = 0;
const $ = (id) => document.getElementById(id);
const pairText = (p) => '(' + p[0] + ', ' + p[1] + ')';
const plural = (n, word) => n + ' ' + word + (n === 1 ? '' : 's');
function chip(id, cls) {
  const t = data.tokens[String(id)];
  const el = document.createElement('span');
  el.className = 'chip' + (id >= 256 ? ' merged' : '') + (cls ? ' ' + cls : '');
  el.dataset.id = id;
  el.title = 'id ' + id;
  el.innerHTML = '<b>' + (t && t.text !== null ? escapeHtml(t.text) : '#' + id) + '</b><small>' + id + '</small>';
  return el;
}
function escapeHtml(s) { return s.replace(/[&<>"]/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c])); }
function row(doc, marks, cls) {
  const line = document.createElement('div');
  line.className = 'doc';
  doc.forEach((id, i) => line.appendChild(chip(id, marks.has(i) ? cls : '')));
  return line;
}
function render() {
  const total = data.steps.length;
  $('position').textContent = current < total ? 'Step ' + (current + 1) + ' of ' + total : 'Done: ' + total + ' merges';
  $('prev').disabled = current === 0;
  $('next').disabled = current >= total;
  const before = $('before'); before.innerHTML = '';
  const after = $('after'); after.innerHTML = '';
  const counts = $('counts').querySelector('tbody'); counts.innerHTML = '';
  $('verdict').textContent = '';
  if (current >= total) {
    data.final.forEach((doc) => before.appendChild(row(doc, new Set(), '')));
    $('rule').textContent = 'No pair is left, or the merges asked for are done.';
    return;
  }
  const s = data.steps[current];
  s.before.forEach((doc, d) => {
    const marks = new Set(); s.replaced[d].forEach((i) => { marks.add(i); marks.add(i + 1); });
    before.appendChild(row(doc, marks, 'replaced'));
  });
  s.after.forEach((doc, d) => {
    const marks = new Set();
    s.replaced[d].forEach((i, k) => marks.add(i - k));
    after.appendChild(row(doc, marks, 'new'));
  });
  s.counts.slice(0, data.shown).forEach((c, k) => {
    const tr = document.createElement('tr');
    const win = c.pair[0] === s.winner[0] && c.pair[1] === s.winner[1];
    if (win) tr.className = 'winner';
    tr.innerHTML = '<td>' + pairText(c.pair) + '</td><td class="num">' + c.count + '</td><td>' + (win ? 'winner' : '') + '</td>';
    counts.appendChild(tr);
  });
  const tied = s.counts.filter((c) => c.count === s.frequency).length;
  $('rule').textContent = 'Winner ' + pairText(s.winner) + ' with count ' + s.frequency +
    (tied > 1 ? ' (a tie of ' + tied + ' pairs: the numerically smallest pair wins)' : ' (the highest count)') +
    '; it becomes id ' + s.new_id + ' and replaces ' + plural(s.replaced.reduce((a, r) => a + r.length, 0), 'occurrence') +
    ', left to right, never reusing a position.';
}
function explain(text) {
  const s = data.steps[current];
  if (!s) return 'Training is done: there is no next merge.';
  const m = text.match(/^\s*\(?\s*(\d+)\s*,\s*(\d+)\s*\)?\s*$/);
  if (!m) return 'Type a pair as two ids, like 97,98.';
  const p = [Number(m[1]), Number(m[2])];
  const found = s.counts.find((c) => c.pair[0] === p[0] && c.pair[1] === p[1]);
  if (p[0] === s.winner[0] && p[1] === s.winner[1]) return 'Yes: ' + pairText(p) + ' is the pair the rules pick (count ' + s.frequency + ').';
  if (!found) return 'No: ' + pairText(p) + ' does not occur in any document now, so its count is 0.';
  if (found.count < s.frequency) return 'No: ' + pairText(p) + ' occurs ' + found.count + ' times, fewer than ' + pairText(s.winner) + ' with ' + s.frequency + '.';
  return 'No: ' + pairText(p) + ' ties with ' + pairText(s.winner) + ' at ' + s.frequency + ', and on a tie the numerically smaller pair wins: ' + pairText(s.winner) + ' comes first.';
}
$('next').addEventListener('click', () => { if (current < data.steps.length) { current++; render(); } });
$('prev').addEventListener('click', () => { if (current > 0) { current--; render(); } });
$('guess').addEventListener('submit', (e) => { e.preventDefault(); $('verdict').textContent = explain($('pair').value); });
document.addEventListener('keydown', (e) => {
  if (e.target.tagName === 'INPUT') return;
  if (e.key === 'ArrowRight' || e.key === 'n') $('next').click();
  if (e.key === 'ArrowLeft' || e.key === 'p') $('prev').click();
});
render();
"""

_STYLE = """<style>
.controls { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; margin: .5rem 0; }
button { font: inherit; padding: .35rem .8rem; border-radius: .3rem; border: 1px solid #999; background: #f4f6fa; cursor: pointer; }
button:focus-visible, input:focus-visible { outline: 3px solid #2f6fdb; outline-offset: 1px; }
button:disabled { opacity: .45; cursor: default; }
.doc { display: flex; flex-wrap: wrap; gap: .25rem; margin: .3rem 0; padding: .3rem; border-left: 3px solid #d9dde5; }
.chip { display: inline-flex; flex-direction: column; align-items: center; min-width: 1.8rem; padding: .1rem .3rem;
        border: 1px solid #c5cbd6; border-radius: .3rem; background: #fff; }
.chip b { font-family: ui-monospace, monospace; font-weight: 600; } .chip small { color: #5b6475; font-size: .7rem; }
.chip.merged { background: #eef3ff; } .chip.replaced { background: #ffe9c7; border-color: #e08a00; }
.chip.new { background: #d9f5de; border-color: #1e7d32; }
tr.winner td { font-weight: 700; background: #d9f5de; }
#verdict { font-weight: 600; min-height: 1.5em; } #pair { font: inherit; width: 7rem; padding: .3rem; }
</style>"""


def explorer_page(texts: Sequence[str], num_merges: int) -> str:
    """The explorer for ``texts`` over at most ``num_merges`` merges, as one HTML file.

    Raises:
        ValueError: no text, or a negative ``num_merges``.
    """
    if not texts:
        raise InputError("the explorer needs at least one text")
    if num_merges < 0:
        raise InputError(f"num_merges must be 0 or more, got {num_merges}")
    data = explorer_steps(texts, num_merges)
    body = (
        _STYLE
        + "<p>Each document is a row of tokens (the text where the bytes decode, the id below). Press "
          "<kbd>→</kbd> or <i>next merge</i> to apply the rules one step at a time: count adjacent pairs inside each "
          "document, pick the most frequent (a tie goes to the numerically smallest pair), give it the next id, "
          "replace it left to right.</p>"
        + '<div class="controls"><button id="prev" type="button">← previous</button>'
          '<button id="next" type="button">next merge →</button><span id="position" aria-live="polite"></span></div>'
        + '<form id="guess" class="controls"><label for="pair">Which pair merges next?</label>'
          '<input id="pair" placeholder="97,98" autocomplete="off"><button type="submit">check</button></form>'
          '<p id="verdict" aria-live="polite"></p>'
        + '<h2>Before this merge</h2><div id="before" data-testid="before"></div>'
        + '<h2>Pair counts</h2><table id="counts"><thead><tr><th>pair</th><th class="num">count</th><th></th></tr></thead>'
          '<tbody></tbody></table><p id="rule"></p>'
        + '<h2>After this merge</h2><div id="after" data-testid="after"></div>'
        + f'<p class="muted">{len(texts)} documents: ' + escape(", ".join(repr(t) for t in texts[:8]))
        + ("…" if len(texts) > 8 else "") + "</p>"
    )
    return page("BPE explorer", body, data=data, script=_SCRIPT)
