// Typeset math at build time: stdin is a JSON list of [tex, displayMode]; stdout a JSON list of HTML strings.
// Usage: node tools/katex_render.js KATEX_MIN_JS < items.json. A TeX error exits 1 naming the expression.
const katex = require(require('path').resolve(process.argv[2]));
let input = '';
process.stdin.on('data', d => input += d);
process.stdin.on('end', () => {
  const out = [];
  for (const [tex, display] of JSON.parse(input)) {
    try { out.push(katex.renderToString(tex, {displayMode: display, throwOnError: true, output: 'html'})); }
    catch (e) { process.stderr.write(`KaTeX cannot typeset ${JSON.stringify(tex)}: ${e.message}\n`); process.exit(1); }
  }
  process.stdout.write(JSON.stringify(out));
});
