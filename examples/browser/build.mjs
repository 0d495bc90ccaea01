// Bundles src/app.js (+ rsocket-js and the `buffer` polyfill) into dist/app.js with esbuild and
// copies src/index.html next to it. Run through `npm run build` (or ./build.sh, which runs
// `npm ci` first).
import { build } from "esbuild";
import { copyFile, mkdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "dist");

await rm(dist, { recursive: true, force: true });
await mkdir(dist, { recursive: true });
await build({
  absWorkingDir: here,
  entryPoints: ["src/app.js"],
  bundle: true,
  format: "iife",
  platform: "browser",
  target: ["es2020"],
  inject: ["src/buffer-shim.js"],
  minify: true,
  sourcemap: true,
  outfile: join(dist, "app.js"),
  logLevel: "warning",
});
await copyFile(join(here, "src", "index.html"), join(dist, "index.html"));
console.log(`build.mjs: wrote ${dist}/index.html and ${dist}/app.js`);
