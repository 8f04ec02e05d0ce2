// Runs every module's tests (each exports `tests`: [name, function] pairs) and
// leaves the outcome in window.results for the Swift test that opened the
// page (PageUnitTests), and on the page for a person.
const modules = ['board', 'wire', 'ink', 'view', 'gestures', 'localink', 'selection'];
const results = { passed: [], failed: [] };
for (const module of modules) {
  let tests;
  try { ({ tests } = await import(`./${module}.test.js`)); } catch (error) { results.failed.push(`${module}: cannot load: ${error}`); continue; }
  for (const [name, test] of tests) {
    try { await test(); results.passed.push(`${module}: ${name}`); } catch (error) { results.failed.push(`${module}: ${name}: ${error.message}`); }
  }
}
window.results = results;
document.getElementById('out').textContent =
  `${results.passed.length} passed, ${results.failed.length} failed\n` + results.failed.join('\n');
