// Copies the graph-drawing library from node_modules into the Python package's static folder,
// so the evidence page works offline and pip installs need no Node.js. Run: npm ci && npm run vendor
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "src", "simgrag", "serve", "static", "vendor");
mkdirSync(out, { recursive: true });
const pkg = JSON.parse(readFileSync(join(here, "node_modules", "cytoscape", "package.json"), "utf8"));
copyFileSync(join(here, "node_modules", "cytoscape", "dist", "cytoscape.min.js"), join(out, "cytoscape.min.js"));
copyFileSync(join(here, "node_modules", "cytoscape", "LICENSE"), join(out, "cytoscape.LICENSE"));
writeFileSync(join(out, "VERSIONS.json"), JSON.stringify({ cytoscape: pkg.version }, null, 2) + "\n");
console.log(`vendored cytoscape ${pkg.version} into ${out}`);
