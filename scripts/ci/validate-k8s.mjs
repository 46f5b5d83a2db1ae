// Validates rendered Kubernetes manifests against kubernetes-models' compiled schemas,
// including the Prometheus Operator CRDs (ServiceMonitor, PrometheusRule) that
// kubernetes-validate cannot check. Not strict: unknown fields pass here (kubernetes-validate
// --strict covers the core kinds).
// Runs from the npm cache dir (scripts/ci/k8s.sh copies it there) so imports resolve.
// usage: node validate-k8s.mjs [--expect Kind,Kind] FILE.yaml...
import fs from "node:fs";
import * as yaml from "js-yaml";

const args = process.argv.slice(2);
let expect = [];
if (args[0] === "--expect") {
  expect = args[1].split(",");
  args.splice(0, 2);
}
let ok = 0, bad = 0;
const seen = new Set();
for (const f of args) {
  for (const doc of yaml.loadAll(fs.readFileSync(f, "utf8"))) {
    if (!doc) continue;
    const { apiVersion, kind } = doc;
    const where = `${f}: ${kind}/${doc.metadata?.name}`;
    if (typeof apiVersion !== "string" || typeof kind !== "string") {
      bad++; console.log(`FAIL ${where}: missing apiVersion or kind`); continue;
    }
    const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : [null, apiVersion];
    const mod = group === "monitoring.coreos.com"
      ? `@kubernetes-models/prometheus-operator/${group}/${version}/${kind}`
      : `kubernetes-models/${group ? group + "/" : ""}${version}/${kind}`;
    try {
      const M = (await import(mod))[kind];
      new M(doc).validate();
      ok++; seen.add(kind); console.log(`ok   ${where}`);
    } catch (e) {
      bad++; console.log(`FAIL ${where}: ${String(e.message).split("\n").slice(0, 6).join(" | ")}`);
    }
  }
}
for (const k of expect) {
  if (!seen.has(k)) { bad++; console.log(`FAIL expected at least one valid ${k}, found none`); }
}
console.log(`${ok} passed, ${bad} failed`);
process.exit(bad ? 1 : 0);
