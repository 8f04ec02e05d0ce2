// A board's recorded history, played back with the live board's rendering:
// play, pause, speed, and a timeline to seek (the board is rebuilt from the
// oldest checkpoint up to the chosen moment).
import { Board, Renderer } from './board.js';

const boardName = decodeURIComponent(location.pathname.split('/')[2] || 'demo');
document.getElementById('board-name').textContent = boardName;
document.getElementById('live-link').href = `/boards/${encodeURIComponent(boardName)}`;
const canvas = document.getElementById('board');
const statusEl = document.getElementById('status');
const timeline = document.getElementById('timeline');
const clock = document.getElementById('clock');
const playButton = document.getElementById('play');
const speedSelect = document.getElementById('speed');
const renderer = new Renderer(canvas);
let board = new Board();

const replay = window.touchsync = { ready: false, board: () => board, summary: () => board.summary(), position: 0, duration: 0, error: null };

let history = null;
let start = 0;      // hub time of the first batch (µs)
let next = 0;       // index of the next batch to apply
let position = 0;   // µs into the recording
let playing = false;
let lastTick = 0;

function rebuild(to) {
  board = new Board();
  board.loadSnapshot(history.start);
  next = 0;
  advance(to);
}

// Applies every batch recorded at or before `to` µs into the recording.
function advance(to) {
  while (next < history.batches.length && history.batches[next][3] - start <= to) {
    board.applyBatch(history.batches[next]);
    next++;
  }
  position = to;
  replay.position = to;
  timeline.value = replay.duration ? Math.round(1000 * to / replay.duration) : 0;
  clock.textContent = `${(to / 1e6).toFixed(1)} s of ${(replay.duration / 1e6).toFixed(1)} s`;
  renderer.render(board);
}

// Seeks to `to` µs into the recording (backwards means rebuilding).
function seek(to) {
  to = Math.max(0, Math.min(replay.duration, to));
  if (to < position) rebuild(to); else advance(to);
}
replay.seek = seek;

function frame(now) {
  if (!playing) return;
  const elapsed = (now - lastTick) * 1000 * Number(speedSelect.value);
  lastTick = now;
  seek(position + elapsed);
  if (position >= replay.duration) { setPlaying(false); return; }
  requestAnimationFrame(frame);
}

function setPlaying(on) {
  playing = on;
  playButton.textContent = on ? 'pause' : 'play';
  if (on) {
    if (position >= replay.duration) rebuild(0);
    lastTick = performance.now();
    requestAnimationFrame(frame);
  }
}
playButton.addEventListener('click', () => setPlaying(!playing));
timeline.addEventListener('input', () => seek(replay.duration * Number(timeline.value) / 1000));
window.addEventListener('resize', () => { renderer.resize(); renderer.render(board); });

const token = localStorage.getItem('touchsync-token');
const response = await fetch(`/api/boards/${encodeURIComponent(boardName)}/history`, {
  headers: token ? { Authorization: `Bearer ${token}` } : {},
});
const body = await response.json();
if (!response.ok) {
  replay.error = body;
  statusEl.textContent = `no history: ${body.message || body.error} (does the hub run with --data?)`;
} else {
  history = body;
  start = history.batches.length ? history.batches[0][3] : 0;
  replay.duration = history.batches.length ? history.batches[history.batches.length - 1][3] - start : 0;
  statusEl.textContent = `${history.batches.length} batches recorded`;
  rebuild(0);
  replay.ready = true;
}
