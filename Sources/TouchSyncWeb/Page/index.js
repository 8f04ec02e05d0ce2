// The list of boards, and a form to open one. An invitation link lands
// here with its token in the fragment: it is kept for the board pages.
const invited = new URLSearchParams(location.hash.slice(1)).get('token');
if (invited) { localStorage.setItem('touchsync-token', invited); history.replaceState(null, '', '/'); }
document.getElementById('open').addEventListener('submit', e => {
  e.preventDefault();
  location.href = '/boards/' + encodeURIComponent(document.getElementById('name').value);
});
const list = document.getElementById('boards');
// An authenticated gateway lists only the boards the invited user may watch.
const token = localStorage.getItem('touchsync-token');
const reply = await fetch('/api/boards', token ? { headers: { Authorization: 'Bearer ' + token } } : {});
const boards = reply.ok ? await reply.json() : [];
list.replaceChildren(...(boards.length ? boards : [null]).map(b => {
  const li = document.createElement('li');
  if (!b) { li.textContent = 'none yet: open one above'; return li; }
  const a = document.createElement('a');
  a.href = '/boards/' + encodeURIComponent(b.board);
  a.textContent = b.board;
  const replay = document.createElement('a');
  replay.href = a.href + '/replay';
  replay.textContent = 'replay';
  li.append(a, ` — ${b.strokes} strokes, ${b.tabs} tabs open, sequence ${b.sequence} · `, replay);
  return li;
}));
