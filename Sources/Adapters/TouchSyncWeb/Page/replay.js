// A board's recorded history, played back with the live board's rendering:
// play, pause, speed, and a timeline to seek (the board is rebuilt from the
// oldest checkpoint up to the chosen moment). Idle gaps longer than
// IDLE_GAP_US play as SKIPPED_GAP_US and are marked on the timeline, so a
// few minutes of drawing spread over an hour play in a few minutes.
import { Board } from './board.js';
import { Renderer, onSchemeChange } from './renderer.js';
import { Viewport } from './view.js';
import { attachPanZoom } from './gestures.js';

export const IDLE_GAP_US = 2_000_000;
export const SKIPPED_GAP_US = 300_000;

const boardName = decodeURIComponent(location.pathname.split('/')[2] || 'demo');
document.getElementById('board-name').textContent = boardName;
document.getElementById('live-link').href = `/boards/${encodeURIComponent(boardName)}`;
const canvas = document.getElementById('board');
const statusEl = document.getElementById('status');
const timeline = document.getElementById('timeline');
const clock = document.getElementById('clock');
const playButton = document.getElementById('play');
const speedSelect = document.getElementById('speed');
const view = new Viewport();
const renderer = new Renderer(canvas, view);
const marks = document.getElementById('marks');
let board = new Board();

const replay = window.touchsync = { ready: false, board: () => board, summary: () => board.summary(), position: 0, duration: 0, error: null, view, renderer };

let history = null;
let playTimes = []; // each batch's time on the compressed timeline (µs)
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
  while (next < history.batches.length && playTimes[next] <= to) {
    board.applyBatch(history.batches[next]);
    next++;
  }
  position = to;
  replay.position = to;
  timeline.value = replay.duration ? Math.round(1000 * to / replay.duration) : 0;
  clock.textContent = `${(to / 1e6).toFixed(1)} s of ${(replay.duration / 1e6).toFixed(1)} s`;
  renderer.render(board);
}

function draw() { renderer.render(board, { rebuild: true }); }
renderer.onRebuildDue = draw;
onSchemeChange(draw);
attachPanZoom(canvas, view, { onChange: () => renderer.render(board), allowOneFinger: true });

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

// The board's extent in points: every accepted stroke's samples, widened by half its width.
export function boardBounds(b) {
  let rect = null;
  for (const stroke of b.accepted) {
    const half = stroke.w / 64 / 2;
    for (let k = 0; k < stroke.s.length; k += 4) {
      const x = stroke.s[k] / 64, y = stroke.s[k + 1] / 64;
      rect = rect ? [Math.min(rect[0], x - half), Math.min(rect[1], y - half), Math.max(rect[2], x + half), Math.max(rect[3], y + half)]
        : [x - half, y - half, x + half, y + half];
    }
  }
  return rect;
}

const PLAY = 'M8 5l11 7-11 7z', PAUSE = 'M7 5h3v14H7zM14 5h3v14h-3z';
function setPlaying(on) {
  playing = on;
  playButton.title = on ? 'Pause (space)' : 'Play (space)';
  playButton.setAttribute('aria-label', on ? 'pause' : 'play');
  document.getElementById('play-icon').setAttribute('d', on ? PAUSE : PLAY);
  if (on) {
    if (position >= replay.duration) rebuild(0);
    lastTick = performance.now();
    requestAnimationFrame(frame);
  }
}
playButton.addEventListener('click', () => setPlaying(!playing));
document.addEventListener('keydown', e => {
  if (e.key === ' ' && !(e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement)) { e.preventDefault(); if (history) setPlaying(!playing); }
});
function say(text) { statusEl.textContent = text; statusEl.hidden = !text; }
timeline.addEventListener('input', () => seek(replay.duration * Number(timeline.value) / 1000));
// The view fits the whole board until the viewer pans or zooms; a resize fits it again.
let fittedBounds = null, viewMoved = false;
canvas.addEventListener('pointerdown', () => { viewMoved = true; });
canvas.addEventListener('wheel', () => { viewMoved = true; });
function fit() { if (fittedBounds && !viewMoved) view.fit(fittedBounds, renderer.width, renderer.height); }
replay.fit = () => { viewMoved = false; fit(); draw(); };
replay.bounds = () => fittedBounds;
new ResizeObserver(() => { renderer.resize(); fit(); draw(); }).observe(canvas);

const token = localStorage.getItem('touchsync-token');
const response = await fetch(`/api/boards/${encodeURIComponent(boardName)}/history`, {
  headers: token ? { Authorization: `Bearer ${token}` } : {},
});
const body = await response.json();
if (!response.ok) {
  replay.error = body;
  say(body.error === 'HUB_UNAVAILABLE' ? `The hub cannot be reached: ${body.message}` : `No history: ${body.message || body.error} (does the hub run with --data?)`);
} else {
  history = body;
  // The compressed timeline: idle gaps shortened, each marked.
  const gaps = [];
  let at = 0;
  history.batches.forEach((batch, i) => {
    if (i > 0) {
      const gap = batch[3] - history.batches[i - 1][3];
      if (gap > IDLE_GAP_US) { gaps.push({ at: at + SKIPPED_GAP_US / 2, skipped: gap - SKIPPED_GAP_US }); at += SKIPPED_GAP_US; }
      else at += Math.max(0, gap);
    }
    playTimes.push(at);
  });
  replay.duration = at;
  replay.gaps = gaps;
  replay.recorded = history.batches.length ? history.batches[history.batches.length - 1][3] - history.batches[0][3] : 0;
  marks.replaceChildren(...gaps.map(gap => {
    const mark = document.createElement('span');
    mark.className = 'gap-mark';
    mark.style.left = `${(100 * gap.at / (at || 1)).toFixed(2)}%`;
    mark.title = `${(gap.skipped / 1e6).toFixed(0)} s idle skipped`;
    return mark;
  }));
  const empty = history.batches.length === 0 && history.start.accepted.length === 0 && history.start.active.length === 0;
  say(empty ? 'Nothing has been drawn on this board yet.' : '');
  replay.changes = history.batches.length;
  playButton.disabled = empty;
  rebuild(replay.duration);   // the whole board first, fitted, then from the start
  renderer.resize();
  fittedBounds = boardBounds(board);
  fit();
  rebuild(0);
  replay.ready = true;
}
