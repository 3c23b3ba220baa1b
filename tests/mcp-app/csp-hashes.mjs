// Writes the CSP hashes of assets/mcp-app/viewer.html's one inline <script> and one <style>
// into its Content-Security-Policy meta tag. Run after editing either:
//   node tests/mcp-app/csp-hashes.mjs          (rewrites the file)
//   node tests/mcp-app/csp-hashes.mjs --check  (exit 1 when the tag is stale)
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const file = fileURLToPath(new URL("../../assets/mcp-app/viewer.html", import.meta.url));
const html = readFileSync(file, "utf8");
const one = (re, what) => {
  const all = [...html.matchAll(re)];
  if (all.length !== 1) throw new Error(`expected one ${what}, found ${all.length}`);
  return all[0][1];
};
const sha = (s) => "sha256-" + createHash("sha256").update(s, "utf8").digest("base64");
const script = sha(one(/<script>([\s\S]*?)<\/script>/g, "<script>"));
const style = sha(one(/<style>([\s\S]*?)<\/style>/g, "<style>"));
const out = html
  .replace(/script-src '[^']*'/, `script-src '${script}'`)
  .replace(/style-src '[^']*'/, `style-src '${style}'`);
if (process.argv.includes("--check")) {
  if (out !== html) {
    console.error("the CSP hashes of assets/mcp-app/viewer.html are stale: run node tests/mcp-app/csp-hashes.mjs");
    process.exit(1);
  }
} else if (out !== html) {
  writeFileSync(file, out);
  console.log(`script-src '${script}'; style-src '${style}'`);
}
