// Writes NAME.gz beside every compressible file of the bundle, so the api-server serves
// the precompressed copy to browsers that accept gzip (no compression at request time).
// Level and header are fixed, so the output is the same on every machine.
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync, constants } from "node:zlib";

const dir = process.argv[2] ?? "dist";
const compressible = /\.(js|css|html|svg|json|txt|map)$/;

function walk(path) {
  for (const name of readdirSync(path)) {
    const file = join(path, name);
    if (statSync(file).isDirectory()) walk(file);
    else if (compressible.test(name)) {
      const gz = gzipSync(readFileSync(file), { level: constants.Z_BEST_COMPRESSION });
      writeFileSync(`${file}.gz`, gz);
    }
  }
}
walk(dir);
