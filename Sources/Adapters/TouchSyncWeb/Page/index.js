// The hubs' boards (and those open here) as cards (name, people now, last activity, a
// thumbnail), and a form to open or create one. An invitation link lands
// here with its token in the fragment: it is kept for the board pages.
const invited = new URLSearchParams(location.hash.slice(1)).get('token');
if (invited) { localStorage.setItem('touchsync-token', invited); history.replaceState(null, '', '/'); }

// The hub's rule (docs/protocol.md, "Board names"): 1 to 128 bytes of UTF-8, no control characters.
export function boardNameProblem(name) {
  const bytes = new TextEncoder().encode(name).length;
  if (bytes === 0) return 'a board needs a name';
  if (bytes > 128) return `a board name is at most 128 bytes of UTF-8 (this one is ${bytes})`;
  if (/[\u0000-\u001f\u007f]/.test(name)) return 'a board name has no control characters';
  return null;
}

const input = document.getElementById('name');
const problem = document.getElementById('open-error');
input.addEventListener('input', () => { problem.textContent = boardNameProblem(input.value) ?? ''; });
document.getElementById('open').addEventListener('submit', e => {
  e.preventDefault();
  const why = boardNameProblem(input.value);
  if (why) { problem.textContent = why; return; }
  location.href = '/boards/' + encodeURIComponent(input.value);
});

function blank() {
  const box = document.createElement('div');
  box.className = 'blank';
  return box;
}

function ago(ms) {
  if (!ms) return 'no drawing yet';
  const s = Math.max(0, (Date.now() - ms) / 1000);
  if (s < 60) return 'active now';
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} days ago`;
}

const list = document.getElementById('boards');
// An authenticated gateway lists only the boards the invited user may watch.
const token = localStorage.getItem('touchsync-token');
const headers = token ? { Authorization: 'Bearer ' + token } : {};
const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;
let reply = null;
try { reply = await fetch('/api/boards', { headers }); } catch { reply = null; }
const boards = reply?.ok ? await reply.json() : [];
// The gateway lists what it could: a hub that did not answer is said, not taken for an empty list.
const unreachable = Number(reply?.headers.get('TouchSync-Unreachable-Hubs') ?? 0);
const why = !reply ? 'The gateway cannot be reached.' : reply.status === 401 ? 'This list needs an invitation link.'
  : !reply.ok ? `The board list failed (${reply.status}).`
  : unreachable > 0 ? `The hub cannot be reached${unreachable > 1 ? ` (${unreachable} hubs)` : ''}: its boards are not listed; boards open here are.` : '';
document.getElementById('list-problem').textContent = why;
document.getElementById('list-problem').hidden = !why;
list.replaceChildren(...(boards.length ? boards : [null]).map(b => {
  const li = document.createElement('li');
  if (!b) { li.textContent = why ? 'No board to show.' : 'No boards yet: open one above.'; li.className = 'empty'; return li; }
  const href = '/boards/' + encodeURIComponent(b.board);
  const card = document.createElement('a');
  card.className = 'card';
  card.href = href;
  const picture = document.createElement('img');
  picture.alt = '';
  picture.loading = 'lazy';
  // A thumbnail, fetched with the token when there is one.
  fetch(`/api/boards/${encodeURIComponent(b.board)}/thumbnail.svg`, { headers })
    .then(r => r.ok ? r.blob() : null)
    .then(blob => { if (blob) picture.src = URL.createObjectURL(blob); else picture.replaceWith(blank()); })
    .catch(() => picture.replaceWith(blank()));
  const meta = document.createElement('div');
  meta.className = 'meta';
  const title = document.createElement('strong');
  title.textContent = b.board;
  // Agents on the hub include this gateway's tabs; other gateways' and programs' count too.
  const people = Math.max(b.agents ?? 0, b.tabs);
  meta.append(title, `${plural(people, 'person', 'people')} here · ${plural(b.strokes, 'stroke', 'strokes')} · ${ago(b.lastActivity)}`);
  card.append(picture, meta);
  const links = document.createElement('div');
  links.className = 'links';
  const replay = document.createElement('a');
  replay.href = href + '/replay';
  replay.textContent = 'replay';
  links.append(replay);
  li.append(card, links);
  return li;
}));
