import { TouchChains, decodePackedBatch, packedSequence, encodeTouch, decodeFrame, frames } from './wire.js';
import { Board } from './board.js';
import { equal, ok, throws } from './check.js';

const hex = bytes => [...bytes].map(b => b.toString(16).padStart(2, '0')).join('');
const t0 = 1_763_900_000_000;

export const tests = [
  ['a moving finger costs a few bytes a frame once its chain runs', () => {
    const chains = new TouchChains();
    const sizes = [];
    for (let i = 0; i < 6; i++) {
      const x = 100 + i * 5, t = t0 + i * 16.5;
      sizes.push(chains.encode({ n: i + 1, phase: i ? 'moved' : 'began', id: 1, s: [[x, 50, t]], p: [[x + 5, 50, t + 16.5]] }).length);
    }
    ok(sizes.slice(2).every(size => size <= 10), `sizes ${sizes}`);
    ok(sizes[0] > 15, `the first frame carries absolute values: ${sizes[0]}`);
  }],
  ['the same touches on a fresh chain make the same bytes (a reconnect re-encodes)', () => {
    const touches = [{ n: 1, phase: 'began', id: 7, s: [[1, 2, 3]] }, { n: 3, phase: 'moved', id: 7, s: [[2, 3, 4]], p: [[3, 4, 5]] }];
    const first = new TouchChains(), again = new TouchChains();
    equal(touches.map(t => hex(first.encode(t))), touches.map(t => hex(again.encode(t))), 'bytes');
  }],
  ['a touch that ends is forgotten; at most 32 touches are held', () => {
    const chains = new TouchChains();
    chains.encode({ n: 1, phase: 'began', id: 1, s: [[1, 1, 1]] });
    chains.encode({ n: 2, phase: 'ended', id: 1, s: [[2, 2, 2]] });
    equal(chains.chains.length, 0, 'ended');
    for (let id = 0; id < 40; id++) chains.encode({ n: 3 + id, phase: 'began', id, s: [[id, id, id]] });
    equal(chains.chains.length, 32, 'held');
    equal(chains.chains[0].touch, 8, 'the least recently named went first');
  }],
  ['a standalone binary touch and a binary batch read back', () => {
    equal(hex(encodeTouch({ n: 1, phase: 'began', id: 1, s: [[100, 50.5, 1763900000123.25]] })), '010100010100008064c032e4e5e98ebf90a206', 'touch');
    const batch = decodeFrame(new Uint8Array([1, 9, 1, 0x63, 4]).buffer);
    equal(batch, ['b', 9, [['c', 4]]], 'batch');
    equal(decodeFrame(new Uint8Array([2, 0xac, 0x02]).buffer), { t: 'ack', n: 300 }, 'ack');
    equal(frames(new Uint8Array([3, 2, 2, 5, 2, 2, 6]).buffer).map(f => hex(new Uint8Array(f))), ['0205', '0206'], 'bundle');
  }],
  ['a packed batch reads against the board; samples for a stroke it lacks are refused', () => {
    const board = new Board();
    board.loadSnapshot({ seq: 4, accepted: [], active: [] });
    // seq 5: one 'c' diff for stroke 9 (no samples needed).
    const cancel = new Uint8Array([4, 5, 1, 0x63, 9]).buffer;
    equal(packedSequence(cancel), 5, 'sequence read alone');
    equal(decodePackedBatch(cancel, board), ['b', 5, [['c', 9]]], 'a plain diff');
    // A block: one segment, stroke 2 (zigzag 4), one sample (1 << 2), widths 0: samples for a stroke not in progress.
    throws(() => decodePackedBatch(new Uint8Array([4, 5, 1, 0x73, 1, 4, 4, 0, 0, 0]).buffer, board), 'unknown stroke');
    // The same after a 'b' in the batch: a first sample at the anchor (0, 0, 0) with every residual 0.
    const began = [0x62, 2, 5, 0x77, 0x65, 0x62, 0x3a, 0x61, 1, 0x80, 0x02, 0x80, 0x02];
    equal(decodePackedBatch(new Uint8Array([4, 5, 2, ...began, 0x73, 1, 4, 4, 0, 0, 0]).buffer, board),
      ['b', 5, [['b', 2, 'web:a', 1, 256, 256], ['a', 2, 0, [0, 0, 0, 0]]]], 'a new stroke\'s first sample');
  }],
  ['a packed2 batch has no item count and names strokes by rank among those in progress', () => {
    const board = new Board();
    board.loadSnapshot({ seq: 4, accepted: [], active: [] });
    equal(decodePackedBatch(new Uint8Array([4, 5, 0x63, 9]).buffer, board, 'packed2'), ['b', 5, [['c', 9]]], 'items to the end');
    equal(decodePackedBatch(new Uint8Array([4, 5]).buffer, board, 'packed2'), ['b', 5, []], 'no items');
    // A block "S": one segment (k 1 << 1), rank 0, one sample (1 << 4), widths 0: no stroke is in progress.
    throws(() => decodePackedBatch(new Uint8Array([4, 5, 0x53, 2, 0x10, 0, 0]).buffer, board, 'packed2'), 'a rank past the strokes in progress');
    throws(() => decodePackedBatch(new Uint8Array([4, 5, 0x73, 1, 4, 4, 0, 0, 0]).buffer, board, 'packed2'), 'an s block on packed2');
    const began = [0x62, 2, 5, 0x77, 0x65, 0x62, 0x3a, 0x61, 1, 0x80, 0x02, 0x80, 0x02];
    equal(decodePackedBatch(new Uint8Array([4, 5, ...began, 0x53, 2, 0x10, 0, 0]).buffer, board, 'packed2'),
      ['b', 5, [['b', 2, 'web:a', 1, 256, 256], ['a', 2, 0, [0, 0, 0, 0]]]], 'rank 0 is the stroke the batch began');
  }],
];
