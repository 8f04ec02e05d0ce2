// Your own strokes and changes, on your screen at once, before the hub has
// them (docs/architecture.md, "Local ink"): strokes in progress (by pointer),
// finished strokes until the board's diffs accept them, strokes an undo,
// erase or clear of yours hides until the hub removes them too, and strokes a
// redo shows again until the hub restores them, and the strokes an edit of
// yours moved, recoloured or copied (a preview of the hub's result, the
// originals hidden) until the hub's diffs replace them. Each waits for the hub's
// acknowledgement of its message, then a little for the diffs: past that the
// hub did not do it and the board shows what it has. No DOM here.
import { UNITS } from './board.js';
import { editedStroke } from './selection.js';

// Copies an edit makes are drawn on touch ids from 2^32 up (docs/protocol.md, "Edits").
export const COPY_TOUCH = 2 ** 32;

export class LocalInk {
  // board: the replica; user(): your namespace; acked(): the last number the hub acknowledged;
  // post(message): numbers and sends it (null when the page may not);
  // toast(text), render(rebuild), dropped(pointer): a stroke in progress ended without its pointer.
  // copied(stroke): a copy an edit of this tab asked for arrived.
  constructor({ board, user, acked, post, toast, render, dropped, copied }) {
    Object.assign(this, { board, user, acked, post, toast, render, dropped, copied });
    this.local = new Map();    // pointer id -> ink in progress
    this.finished = [];        // ended ink, until the hub accepts it
    this.hidden = new Map();   // stroke id -> {n, ackedAt}: undone or erased here
    this.overlay = new Map();  // stroke id -> {stroke, n, ackedAt}: redone here
    this.clearing = [];        // {owner (null: everyone), through: accept position, n, ackedAt}
    this.undone = [];          // {ink or stroke, or edit: true}: what this tab undid, newest last, for an immediate redo
    this.editing = new Map();  // stroke id -> {stroke: its preview, original: the board's stroke it replaces, n, ackedAt}
    this.copies = [];          // {stroke: a copy's preview, n, ackedAt}
    this.claimed = new Set();  // copies' ids already matched to a preview
    this.history = [];         // 'stroke' or 'edit': this tab's operations in order, for what an undo takes back
    board.onAccepted = stroke => this.accepted(stroke);
    board.onCancelled = stroke => this.cancelled(stroke);
  }

  // The ink to draw over the board: finished strokes not undone, then those in progress.
  get drawn() { return [...this.finished.filter(ink => !ink.hiddenBy), ...this.local.values()]; }
  // Replica strokes drawn over the board: redone ones and edits' previews.
  get overlayStrokes() {
    return [...this.overlay.values(), ...this.editing.values(), ...this.copies].map(entry => entry.stroke);
  }
  // Touches the local ink draws (the replica's strokes of yours on them are not drawn twice).
  get touches() { return new Set([...this.local.values(), ...this.finished].map(ink => ink.touch)); }

  sameStart(ink, stroke) {
    if (stroke.owner !== this.user() || stroke.touch !== ink.touch || stroke.s.length < 4 || ink.points.length === 0) return false;
    const x = Math.round(ink.points[0][0] * UNITS), y = Math.round(ink.points[0][1] * UNITS);
    return Math.abs(stroke.s[0] - x) <= 1 && Math.abs(stroke.s[1] - y) <= 1;
  }

  findAccepted(ink) {
    const accepted = this.board.accepted;
    for (let i = accepted.length - 1; i >= 0; i--) if (this.sameStart(ink, accepted[i])) return accepted[i];
    return null;
  }

  removeFinished(ink) {
    const i = this.finished.indexOf(ink);
    if (i >= 0) this.finished.splice(i, 1);
  }

  // A snapshot: finished ink the board already has goes.
  loaded() { for (const ink of [...this.finished]) if (this.findAccepted(ink)) this.removeFinished(ink); }

  accepted(stroke) {
    if (stroke.owner !== this.user()) return;
    const ink = this.finished.find(candidate => this.sameStart(candidate, stroke));
    if (!ink) return;
    this.removeFinished(ink);
    // Undone or cleared here before the hub accepted it: keep it hidden until the hub removes it too.
    if (ink.hiddenBy) this.hidden.set(stroke.id, ink.hiddenBy);
    for (const entry of this.undone) if (entry.ink === ink) { entry.ink = null; entry.stroke = stroke; }
  }

  cancelled(stroke) {
    if (stroke.owner !== this.user()) return;
    for (const [pointer, ink] of this.local) {
      if (this.sameStart(ink, stroke)) { this.local.delete(pointer); this.dropped(pointer); this.toast('your stroke was cancelled by the hub'); }
    }
    const ink = this.finished.find(candidate => this.sameStart(candidate, stroke));
    if (ink) this.removeFinished(ink);
  }

  // The gateway refused message `number`: what it carried is not shown any more.
  refused(number, reason) {
    for (const [pointer, ink] of this.local) {
      if (ink.numbers.includes(number)) { this.local.delete(pointer); this.dropped(pointer); ink.refused = reason; }
    }
    for (const ink of [...this.finished]) if (ink.numbers.includes(number)) this.removeFinished(ink);
    for (const [id, entry] of this.hidden) if (entry.n === number) this.hidden.delete(id);
    for (const [id, entry] of this.overlay) if (entry.n === number) this.overlay.delete(id);
    for (const [id, entry] of this.editing) if (entry.n === number) this.editing.delete(id);
    this.copies = this.copies.filter(entry => entry.n !== number);
    this.render(true);
  }

  // The hub acknowledged every message numbered up to `through` (at `now`).
  acknowledged(through, now) {
    for (const entry of this.hidden.values()) if (entry.ackedAt === null && entry.n <= through) entry.ackedAt = now;
    for (const entry of [...this.overlay.values(), ...this.editing.values(), ...this.copies]) {
      if (entry.ackedAt === null && entry.n <= through) entry.ackedAt = now;
    }
    for (const ink of this.finished) {
      if (ink.ackedAt === null && ink.numbers[ink.numbers.length - 1] <= through) ink.ackedAt = now;
      if (ink.hiddenBy && ink.hiddenBy.ackedAt === null && ink.hiddenBy.n <= through) ink.hiddenBy.ackedAt = now;
    }
    this.reconcile();
  }

  // A new session numbered the waiting messages afresh: what waits for them follows (`follow`: old to new, 0 if done).
  renumber(follow) {
    for (const ink of [...this.local.values(), ...this.finished]) ink.numbers = ink.numbers.map(follow);
    const entries = new Set([
      ...this.hidden.values(), ...this.overlay.values(), ...this.editing.values(), ...this.copies, ...this.clearing,
      ...this.finished.map(ink => ink.hiddenBy),
    ]);
    for (const entry of entries) if (entry) entry.n = follow(entry.n);
  }

  // Hidden strokes and the overlay end once the hub's diffs agree (or, acknowledged
  // for 2 s without the change, the hub did not do it: the board shows what it has).
  reconcile() {
    const now = performance.now();
    let changed = false;
    const present = this.hidden.size || this.overlay.size || this.clearing.length ? new Set(this.board.accepted.map(s => s.id)) : null;
    for (const [id, entry] of this.hidden) {
      if (!present.has(id) && entry.ackedAt !== null) { this.hidden.delete(id); }
      else if (present.has(id) && entry.ackedAt !== null && now - entry.ackedAt > 2000) { this.hidden.delete(id); changed = true; }
    }
    for (const [id, entry] of this.overlay) {
      if ((present.has(id) && entry.ackedAt !== null) || (entry.ackedAt !== null && now - entry.ackedAt > 2000)) { this.overlay.delete(id); changed = true; }
    }
    // An edited stroke's preview ends when the board holds another version of it (or none).
    if (this.editing.size) {
      const current = new Map(this.board.accepted.map(s => [s.id, s]));
      for (const [id, entry] of this.editing) {
        if (entry.ackedAt === null) continue;
        if (current.get(id) !== entry.original || now - entry.ackedAt > 2000) { this.editing.delete(id); changed = true; }
      }
    }
    for (let i = this.copies.length - 1; i >= 0; i--) {
      const entry = this.copies[i];
      if (entry.ackedAt === null) continue;
      const arrived = this.board.accepted.find(s => s.owner === this.user() && s.touch >= COPY_TOUCH && !this.claimed.has(s.id) && sameSamples(s.s, entry.stroke.s));
      if (arrived) { this.claimed.add(arrived.id); this.copied?.(arrived); }
      if (arrived || now - entry.ackedAt > 2000) { this.copies.splice(i, 1); changed = true; }
    }
    if (!this.copies.length) this.claimed.clear();
    for (let i = this.clearing.length - 1; i >= 0; i--) {
      const c = this.clearing[i];
      const left = this.board.accepted.some(s => s.pos <= c.through && (c.owner === null || s.owner === c.owner));
      if (c.ackedAt === null) { if (c.n <= this.acked()) c.ackedAt = now; continue; }
      if (!left || now - c.ackedAt > 2000) { this.clearing.splice(i, 1); changed = true; }
    }
    for (const ink of [...this.finished]) {
      if (ink.ackedAt !== null && now - ink.ackedAt > 3000) {
        this.removeFinished(ink);
        changed = true;
        if (!ink.hiddenBy) this.toast('a stroke was not accepted by the hub');
      }
    }
    if (changed) this.render(true);
  }

  isHidden(stroke) {
    if (this.hidden.has(stroke.id)) return true;
    if (this.editing.get(stroke.id)?.original === stroke) return true;
    for (const c of this.clearing) if (stroke.pos <= c.through && (c.owner === null || stroke.owner === c.owner)) return true;
    return false;
  }

  // --- Edits of the selection (docs/protocol.md, "Edits"): shown at once, then as the hub says.
  // `message`: {t: 'edit', op, strokes, ...}; `strokes`: the board's strokes it names. The number, or null.
  edit(message, strokes) {
    const n = this.post(message);
    if (n === null) return null;
    for (const stroke of strokes) {
      const shown = this.editing.get(stroke.id)?.stroke ?? stroke;
      if (message.op === 'delete') this.hidden.set(stroke.id, { n, ackedAt: null });
      else if (message.op === 'duplicate') this.copies.push({ stroke: { ...editedStroke(shown, message), id: -1 - this.copies.length, owner: this.user() }, n, ackedAt: null });
      else this.editing.set(stroke.id, { stroke: editedStroke(shown, message), original: stroke, n, ackedAt: null });
    }
    this.history.push('edit');
    this.undone.length = 0;
    this.render(true);
    return n;
  }

  // A stroke of this tab ended (for what an undo takes back).
  ended() { this.history.push('stroke'); }

  // --- Undo, redo and clear of your own strokes: at once, then as the hub says.
  undo() {
    if (this.history[this.history.length - 1] === 'edit') {
      // The hub takes back the edit: its diffs show it (one round trip).
      const n = this.post({ t: 'undo' });
      if (n === null) return;
      this.history.pop();
      this.undone.push({ edit: true });
      return;
    }
    this.history.pop();
    const ink = [...this.finished].reverse().find(candidate => !candidate.hiddenBy);
    const n = this.post({ t: 'undo' });
    if (n === null) return;
    if (ink) { ink.hiddenBy = { n, ackedAt: null }; this.undone.push({ ink, stroke: null }); }
    else {
      const accepted = this.board.accepted;
      for (let i = accepted.length - 1; i >= 0; i--) {
        const s = accepted[i];
        if (s.owner !== this.user() || this.isHidden(s)) continue;
        this.hidden.set(s.id, { n, ackedAt: null });
        this.undone.push({ ink: null, stroke: s });
        break;
      }
    }
    this.render(true);
  }

  redo() {
    const n = this.post({ t: 'redo' });
    if (n === null) return;
    const last = this.undone.pop();
    this.history.push(last?.edit ? 'edit' : 'stroke');
    if (last?.ink) last.ink.hiddenBy = null;
    else if (last?.stroke) {
      this.hidden.delete(last.stroke.id);
      this.overlay.set(last.stroke.id, { stroke: last.stroke, n, ackedAt: null });
    }
    this.render(true);
  }

  clear(scope) {
    const n = this.post({ t: 'clear', scope });
    if (n === null) return;
    const accepted = this.board.accepted;
    const through = accepted.length ? accepted[accepted.length - 1].pos : -1;
    this.clearing.push({ owner: scope === 'mine' ? this.user() : null, through, n, ackedAt: null });
    for (const ink of this.finished) ink.hiddenBy = ink.hiddenBy ?? { n, ackedAt: null };
    this.undone.length = 0;
    this.history = this.history.filter(entry => entry === 'stroke');   // a clear ends what edits can be undone
    this.render(true);
  }
}

function sameSamples(a, b) {
  if (a.length !== b.length) return false;
  for (let k = 0; k < a.length; k += 4) if (a[k] !== b[k] || a[k + 1] !== b[k + 1]) return false;
  return true;
}
