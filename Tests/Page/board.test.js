import { Board, decodeSamples } from './board.js';
import { equal, ok } from './check.js';

const stroke = (id, owner, s, pos) => ({ id, owner, touch: 1, rgba: 255, w: 256, ...(pos ? { pos } : {}), s, p: [] });

export const tests = [
  ['sample lists are deltas, the first from the base', () => {
    equal(decodeSamples([640, 1280, 1000, 0, 64, 32, 16667, 512]), [640, 1280, 1000, 0, 704, 1312, 17667, 512], 'absolute');
    equal(decodeSamples([10, -10, 5, 0], [0, 0, 0, 0, 100, 200, 300, 0]), [110, 190, 305, 0], 'from the base\'s last sample');
  }],
  ['a batch applies only as the next one; older are skipped, a gap is said', () => {
    const board = new Board();
    equal(board.applyBatch(['b', 1, []]), 'old', 'before a snapshot');
    board.loadSnapshot({ seq: 5, accepted: [], active: [] });
    equal(board.applyBatch(['b', 5, []]), 'old', 'the snapshot\'s own');
    equal(board.applyBatch(['b', 7, []]), 'gap', 'one missing');
    equal(board.applyBatch(['b', 6, [['b', 1, 'web:a', 1, 255, 256]]]), 'applied', 'the next');
    equal(board.seq, 6, 'sequence');
    ok(board.active.has(1), 'the stroke began');
  }],
  ['appends continue the stroke, a prediction is replaced, acceptance moves it', () => {
    const board = new Board();
    board.loadSnapshot({ seq: 0, accepted: [], active: [] });
    board.applyBatch(['b', 1, [['b', 1, 'web:a', 3, 255, 256], ['a', 1, 0, [640, 640, 1000, 0]], ['p', 1, [64, 0, 8000, 0]]]]);
    board.applyBatch(['b', 2, [['a', 1, 1, [64, 64, 16000, 0]], ['p', 1, []]]]);
    const live = board.active.get(1);
    equal(live.s, [640, 640, 1000, 0, 704, 704, 17000, 0], 'samples');
    equal(live.p, [], 'prediction removed');
    board.applyBatch(['b', 3, [['A', 1, 1]]]);
    equal(board.active.size, 0, 'no stroke in progress');
    equal(board.accepted.map(s => [s.id, s.pos]), [[1, 1]], 'accepted at position 1');
  }],
  ['clear removes one owner\'s accepted strokes, or all; strokes in progress stay', () => {
    const board = new Board();
    board.loadSnapshot({ seq: 0, accepted: [stroke(1, 'web:a', [0, 0, 0, 0], 1), stroke(2, 'web:b', [0, 0, 0, 0], 2)],
      active: [stroke(3, 'web:a', [0, 0, 0, 0])] });
    board.applyBatch(['b', 1, [['C', 'web:a']]]);
    equal(board.accepted.map(s => s.id), [2], 'web:a\'s gone');
    board.applyBatch(['b', 2, [['C', null]]]);
    equal(board.accepted.length, 0, 'all gone');
    ok(board.active.has(3), 'the stroke in progress stays');
  }],
  ['a restored stroke goes back to its place in accept order', () => {
    const board = new Board();
    board.loadSnapshot({ seq: 0, accepted: [stroke(1, 'a', [0, 0, 0, 0], 1), stroke(3, 'a', [0, 0, 0, 0], 3)], active: [] });
    board.applyBatch(['b', 1, [['R', stroke(2, 'a', [0, 0, 0, 0], 2)]]]);
    equal(board.accepted.map(s => s.id), [1, 2, 3], 'order');
    board.applyBatch(['b', 2, [['r', 2]]]);
    equal(board.accepted.map(s => s.id), [1, 3], 'removed again');
  }],
];
