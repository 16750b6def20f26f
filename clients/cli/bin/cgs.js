#!/usr/bin/env node
// A committed launcher, so `npx cgs` finds an executable even before the first build.
try {
  require.resolve("../dist/main.js");
} catch {
  process.stderr.write("cgs is not built yet: run `npm run build` (or `npm start`) at the repository root\n");
  process.exit(2);
}
require("../dist/main.js").main(process.argv);
