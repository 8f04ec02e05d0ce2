import { Board } from './board.js';
import { strokeBounds, unionBounds, touchesRect, touchesLasso, insidePolygon, transformSamples, editedStroke, handleAt, inside, scaleFor, Selection } from './selection.js';
import { equal, ok } from './check.js';

const stroke = (id, s, w = 128) => ({ id, owner: 'web:a', touch: 1, rgba: 255, w, pos: id, s, p: [] });

export const tests = [
  ['a stroke\'s bounds are its samples widened by half its width, in points', () => {
    equal(strokeBounds(stroke(1, [640, 1280, 0, 0, 1280, 640, 10, 0])), [9, 9, 21, 21], 'two samples, 2 pt wide');
    equal(strokeBounds(stroke(1, [])), null, 'no sample');
    equal(unionBounds([stroke(1, [0, 0, 0, 0], 0), stroke(2, [6400, -640, 0, 0], 0)]), [0, -10, 100, 0], 'union');
  }],
  ['a marquee picks strokes with a sample inside it, whichever way it was dragged', () => {
    const s = stroke(1, [640, 640, 0, 0, 6400, 6400, 1, 0]);
    ok(touchesRect(s, [0, 0, 20, 20]), 'first sample inside');
    ok(touchesRect(s, [120, 120, 90, 90]), 'dragged up and left');
    ok(!touchesRect(s, [20, 20, 90, 90]), 'between the samples: none inside');
  }],
  ['a lasso picks strokes with a sample inside its loop, not those only inside its bounds', () => {
    const triangle = [[0, 0], [100, 0], [0, 100]];
    ok(insidePolygon([10, 10], triangle) && !insidePolygon([60, 60], triangle), 'the hypotenuse x + y = 100 divides them');
    const near = stroke(1, [640, 640, 0, 0, 1280, 1280, 1, 0]);           // (10, 10) to (20, 20)
    const corner = stroke(2, [3840, 3840, 0, 0, 4480, 4480, 1, 0]);       // (60, 60) to (70, 70): in the bounds, outside the loop
    ok(touchesLasso(near, triangle), 'inside the loop');
    ok(!touchesLasso(corner, triangle), 'inside its bounds only');
    ok(touchesRect(corner, [0, 0, 100, 100]), 'which a marquee of those bounds would take');
    ok(!touchesLasso(near, [[0, 0], [100, 0]]), 'fewer than three points: nothing');
    const crossing = stroke(3, [-640, 3200, 0, 0, 640, 3200, 1, 0]);       // (-10, 50) to (10, 50): one sample inside
    ok(touchesLasso(crossing, triangle), 'one sample inside is enough, as for a marquee');
  }],
  ['a transform is the hub\'s: about the origin, then the offset, rounded in units', () => {
    equal(transformSamples([640, 640, 5, 7], { dx: 1, dy: -1 }), [704, 576, 5, 7], 'moved one point, time and force kept');
    equal(transformSamples([640, 640, 5, 7], { scale: 2, ox: 5, oy: 5 }), [960, 960, 5, 7], 'doubled about (5, 5)');
    equal(transformSamples([1, -1, 0, 0], { scale: 1.5 }), [2, -2, 0, 0], 'halves away from zero');
  }],
  ['an edited stroke is a new object; recolour keeps the samples', () => {
    const s = stroke(3, [0, 0, 0, 0]);
    const moved = editedStroke(s, { op: 'move', dx: 2, dy: 0 });
    equal(moved.s, [128, 0, 0, 0], 'moved');
    equal(s.s, [0, 0, 0, 0], 'the original is untouched');
    const red = editedStroke(s, { op: 'recolour', rgba: 0xFF0000FF });
    ok(red.rgba === 0xFF0000FF && red.s === s.s, 'recoloured, samples shared');
  }],
  ['the scale handle sits on the far corner at any zoom; the drag\'s scale is bounded', () => {
    const bounds = [0, 0, 100, 50];
    ok(inside([100, 50], handleAt(bounds, 1)), 'the corner');
    ok(!inside([95, 50], handleAt(bounds, 2)), '6 px from it at 200% is outside');
    equal(scaleFor(bounds, [100, 50], [200, 100]), 2, 'twice as far');
    equal(scaleFor(bounds, [100, 50], [0, 0]), 1 / 64, 'never below 1/64');
  }],
  ['the selection forgets strokes that left the board', () => {
    const board = new Board();
    board.loadSnapshot({ seq: 0, accepted: [{ id: 1, owner: 'a', touch: 1, rgba: 0, w: 64, pos: 1, s: [0, 0, 0, 0], p: [] }], active: [] });
    const selection = new Selection();
    selection.set([1, 2]);
    equal(selection.strokes(board).map(s => s.id), [1], 'only stroke 1');
    equal(selection.size, 1, 'stroke 2 forgotten');
  }],
];
