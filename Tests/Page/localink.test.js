import { LocalInk } from './localink.js';
import { Board } from './board.js';
import { equal, ok } from './check.js';

// A LocalInk over a fresh board, posting into a list; `user` is the page's namespace.
function setUp() {
  const board = new Board();
  board.loadSnapshot({ seq: 0, accepted: [], active: [] });
  const sent = [], toasts = [], dropped = [];
  let acked = 0;
  const mine = new LocalInk({
    board, user: () => 'web:me', acked: () => acked, toast: text => toasts.push(text), render: () => {}, dropped: p => dropped.push(p),
    post: message => { sent.push(message); return sent.length; },
  });
  return { board, mine, sent, toasts, dropped, setAcked: n => { acked = n; } };
}
const ink = (touch, x, y, numbers) => ({ touch, points: [[x, y, 0, null]], predicted: [], numbers, complete: true, ackedAt: null, hiddenBy: null });

export const tests = [
  ['the hub\'s accepted stroke takes the finished ink\'s place', () => {
    const { board, mine } = setUp();
    mine.finished.push(ink(1, 10, 20, [1, 2]));
    board.applyBatch(['b', 1, [['b', 1, 'web:me', 1, 255, 256], ['a', 1, 0, [640, 1280, 0, 0]], ['A', 1, 1]]]);
    equal(mine.finished.length, 0, 'finished ink');
    equal(board.accepted.length, 1, 'accepted');
  }],
  ['another user\'s stroke at the same place does not take it', () => {
    const { board, mine } = setUp();
    mine.finished.push(ink(1, 10, 20, [1]));
    board.applyBatch(['b', 1, [['b', 1, 'web:other', 1, 255, 256], ['a', 1, 0, [640, 1280, 0, 0]], ['A', 1, 1]]]);
    equal(mine.finished.length, 1, 'still waiting');
  }],
  ['undo hides at once and redo shows again, before the hub answers', () => {
    const { mine, sent } = setUp();
    mine.finished.push(ink(1, 10, 20, [1]));
    mine.undo();
    equal(mine.drawn.length, 0, 'hidden');
    mine.redo();
    equal(mine.drawn.length, 1, 'shown');
    equal(sent.map(m => m.t), ['undo', 'redo'], 'sent');
  }],
  ['undo of an accepted stroke hides it until the hub removes it', () => {
    const { board, mine, setAcked } = setUp();
    board.applyBatch(['b', 1, [['b', 1, 'web:me', 1, 255, 256], ['a', 1, 0, [0, 0, 0, 0]], ['A', 1, 1]]]);
    mine.undo();
    ok(mine.isHidden(board.accepted[0]), 'hidden at once');
    setAcked(1);
    mine.acknowledged(1, performance.now());
    ok(mine.isHidden(board.accepted[0]), 'acknowledged, not yet removed: still hidden');
    board.applyBatch(['b', 2, [['r', 1]]]);
    mine.reconcile();
    equal(mine.hidden.size, 0, 'the hub removed it: nothing left to hide');
  }],
  ['an acknowledged undo the hub did not do stops hiding after 2 s', () => {
    const { board, mine } = setUp();
    board.applyBatch(['b', 1, [['b', 1, 'web:me', 1, 255, 256], ['a', 1, 0, [0, 0, 0, 0]], ['A', 1, 1]]]);
    mine.undo();
    mine.hidden.get(1).ackedAt = performance.now() - 2500;
    mine.reconcile();
    ok(!mine.isHidden(board.accepted[0]), 'shown as the board has it');
  }],
  ['a clear hides your accepted strokes at once, not others\'', () => {
    const { board, mine } = setUp();
    board.applyBatch(['b', 1, [['b', 1, 'web:me', 1, 255, 256], ['A', 1, 1], ['b', 2, 'web:other', 1, 255, 256], ['A', 2, 2]]]);
    mine.clear('mine');
    ok(mine.isHidden(board.accepted[0]) && !mine.isHidden(board.accepted[1]), 'mine hidden, theirs shown');
  }],
  ['a refused message takes its ink away; a renumbered session follows the numbers', () => {
    const { mine, dropped } = setUp();
    mine.local.set(7, ink(7, 1, 1, [3, 4]));
    mine.finished.push(ink(1, 5, 5, [1, 2]));
    mine.renumber(n => ({ 1: 0, 2: 1, 3: 2, 4: 3 })[n] ?? 0);
    equal(mine.finished[0].numbers, [0, 1], 'finished numbers');
    mine.refused(2, 'no');
    equal([...mine.local.keys()], [], 'the stroke in progress went');
    equal(dropped, [7], 'its pointer is let go');
  }],
  ['an edit shows its preview at once, the original hidden, until the hub\'s version replaces it', () => {
    const { board, mine } = setUp();
    board.applyBatch(['b', 1, [['b', 1, 'web:me', 1, 255, 256], ['a', 1, 0, [640, 1280, 0, 0]], ['A', 1, 1]]]);
    const original = board.accepted[0];
    const n = mine.edit({ t: 'edit', op: 'move', strokes: [1], dx: 5, dy: 0 }, [original]);
    ok(mine.isHidden(original), 'the original is hidden');
    equal(mine.overlayStrokes.map(s => s.s.slice(0, 2)), [[960, 1280]], 'the preview, 5 points right');
    mine.acknowledged(n, performance.now());
    equal(mine.overlayStrokes.length, 1, 'acknowledged, but the board still has the old version');
    board.applyBatch(['b', 2, [['r', 1], ['R', { id: 1, owner: 'web:me', touch: 1, rgba: 255, w: 256, pos: 1, s: [960, 1280, 0, 0], p: [] }]]]);
    mine.reconcile();
    equal(mine.overlayStrokes.length, 0, 'the preview ends');
    ok(!mine.isHidden(board.accepted[0]), 'the hub\'s version is drawn');
  }],
  ['a copy is a preview until the hub\'s copy arrives, which is then reported (to be selected)', () => {
    const { board, mine } = setUp();
    const copied = [];
    mine.copied = stroke => copied.push(stroke.id);
    board.applyBatch(['b', 1, [['b', 1, 'web:me', 1, 255, 256], ['a', 1, 0, [640, 1280, 0, 0]], ['A', 1, 1]]]);
    const n = mine.edit({ t: 'edit', op: 'duplicate', strokes: [1], dx: 16, dy: 0 }, [board.accepted[0]]);
    equal(mine.overlayStrokes.map(s => s.s.slice(0, 2)), [[1664, 1280]], 'the copy\'s preview');
    ok(!mine.isHidden(board.accepted[0]), 'the original stays');
    mine.acknowledged(n, performance.now());
    board.applyBatch(['b', 2, [['b', 2, 'web:me', 2 ** 32, 255, 256], ['a', 2, 0, [1664, 1280, 0, 0]], ['A', 2, 2]]]);
    mine.reconcile();
    equal(copied, [2], 'the copy arrived');
    equal(mine.overlayStrokes.length, 0, 'no preview left');
  }],
  ['a refused edit shows the board as it is; an undo after an edit hides nothing itself', () => {
    const { board, mine, sent } = setUp();
    board.applyBatch(['b', 1, [['b', 1, 'web:me', 1, 255, 256], ['a', 1, 0, [640, 1280, 0, 0]], ['A', 1, 1]]]);
    const n = mine.edit({ t: 'edit', op: 'delete', strokes: [1] }, [board.accepted[0]]);
    ok(mine.isHidden(board.accepted[0]), 'deleted at once');
    mine.refused(n, 'FORBIDDEN');
    ok(!mine.isHidden(board.accepted[0]), 'back when refused');
    mine.edit({ t: 'edit', op: 'recolour', strokes: [1], rgba: 0xFF0000FF }, [board.accepted[0]]);
    mine.undo();
    equal(sent.map(m => m.t), ['edit', 'edit', 'undo'], 'sent');
    equal(mine.hidden.size, 0, 'the hub\'s diffs undo the recolour, not a guess here');
  }],
];
