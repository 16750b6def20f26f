// Builds the API reference the gateway serves at /docs/api: Redocly's `build-docs` renders shared/openapi.json
// into one HTML page, then its inline scripts move into files beside it, because the gateway's CSP allows
// same-origin scripts only (`script-src 'self'`). Its inline styles stay: the gateway allows exactly those by hash,
// on that one page (gateway/src/docs/api-reference-routes.ts). Run by `npm run build`; the output is build output
// (gateway/dist/api-reference/, gitignored).
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const outDir = path.join(root, "gateway", "dist", "api-reference");
/** Where the page loads its scripts from: the gateway serves outDir's files under this path. */
const BASE = "/docs/api/";

const work = mkdtempSync(path.join(tmpdir(), "cgs-api-reference-"));
try {
  const rendered = path.join(work, "redoc.html");
  try {
    execFileSync(
      process.execPath,
      [
        path.join(root, "node_modules", "@redocly", "cli", "bin", "cli.js"),
        "build-docs",
        path.join(root, "shared", "openapi.json"),
        // Redoc's scripts inside the page rather than from Redocly's CDN: the CSP allows no other origin.
        "--inlineBundle",
        "--title",
        "Cloud-gaming platform API reference",
        "--output",
        rendered,
      ],
      {
        cwd: root,
        stdio: "pipe",
        env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" },
      },
    );
  } catch (error) {
    process.stderr.write(String(error.stderr ?? error));
    throw new Error("redocly build-docs failed");
  }
  let html = readFileSync(rendered, "utf8");
  const files = new Map();

  // The one module script: Redoc's bundle, the contract and the call that hydrates the pre-rendered page. It holds
  // literal "<script>" strings, all written "<\/script>", so the first closing tag after it is its own.
  const open = '<script type="module">';
  const start = html.indexOf(open);
  const end = html.indexOf("</script>", start);
  if (start < 0 || end < 0)
    throw new Error("build-docs output has no module script: did its template change?");
  let module = html.slice(start + open.length, end);
  // With telemetry on, the page would report to Redocly, which the CSP refuses (REDOCLY_TELEMETRY=off above turns
  // it off; this makes sure).
  module = module.replace('"disableTelemetry":false', '"disableTelemetry":true');
  if (!module.includes('"disableTelemetry":true'))
    throw new Error("build-docs output: Redoc's telemetry is on");
  // Redoc's search builds its worker from a string (Function()), which `script-src 'self'` refuses (no
  // 'unsafe-eval'); Redoc then searches on the page's own thread, but the refusal is still a CSP violation each
  // load. Say no worker up front instead.
  const workerProbe = /(\w+)\._factory\?\?=Function\(\w+\),!0/;
  if (!workerProbe.test(module)) throw new Error("build-docs output: Redoc's search-worker probe not found");
  module = module.replace(workerProbe, "!1");
  // The "API docs by" credit shows Redocly's logo from its CDN, which `img-src` refuses; the name, drawn here,
  // takes its place.
  const credit = encodeURIComponent(
    '<svg xmlns="http://www.w3.org/2000/svg" width="56" height="16"><text x="0" y="12" font-family="sans-serif" font-size="12" fill="#8a8a8a">Redocly</text></svg>',
  );
  for (const logo of [
    "https://cdn.redoc.ly/redoc/logo-mini-full.svg",
    "https://cdn.redoc.ly/redoc/logo-mini.svg",
  ]) {
    if (!module.includes(logo)) throw new Error(`build-docs output: ${logo} not found`);
    module = module.replaceAll(logo, `data:image/svg+xml,${credit}`);
  }
  files.set("redoc.js", module);
  html = `${html.slice(0, start)}<script type="module" src="${BASE}redoc.js"></script>${html.slice(end + "</script>".length)}`;

  // Classic inline scripts left (the colour-mode switch that runs before the first paint): same-origin files,
  // still loaded synchronously where they stood.
  let n = 0;
  html = html.replace(/<script>([\s\S]*?)<\/script>/g, (_match, body) => {
    const name = `inline-${++n}.js`;
    files.set(name, body);
    return `<script src="${BASE}${name}"></script>`;
  });
  if (/<script(?![^>]*\ssrc=)[^>]*>/.test(html))
    throw new Error("build-docs output: an inline script is left");

  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  writeFileSync(path.join(outDir, "index.html"), html);
  for (const [name, body] of files) writeFileSync(path.join(outDir, name), body);
  console.log(`API reference: ${path.relative(root, outDir)}/ (${[...files.keys()].join(", ")}, index.html)`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
