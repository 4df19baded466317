// A line diff of two texts (longest common subsequence; definitions are short).
export type DiffLine = { kind: "same" | "add" | "del"; text: string };

export function diffLines(a: string, b: string): DiffLine[] {
  const x = a.split("\n");
  const y = b.split("\n");
  const n = x.length;
  const m = y.length;
  // lcs[i][j]: length of the LCS of x[i..] and y[j..]
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--)
      lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) {
      out.push({ kind: "same", text: x[i] });
      i++;
      j++;
    } else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push({ kind: "del", text: x[i++] });
    else out.push({ kind: "add", text: y[j++] });
  }
  while (i < n) out.push({ kind: "del", text: x[i++] });
  while (j < m) out.push({ kind: "add", text: y[j++] });
  return out;
}

export function Diff({
  from,
  to,
  fromLabel,
  toLabel,
}: {
  from: string;
  to: string;
  fromLabel: string;
  toLabel: string;
}) {
  const lines = diffLines(from, to);
  const changed = lines.some((l) => l.kind !== "same");
  const count = (kind: string) => lines.filter((l) => l.kind === kind).length;
  return (
    <section aria-label="Diff" className="diff">
      <p className="muted">
        {fromLabel} → {toLabel}: {changed ? `${count("add")} added, ${count("del")} removed lines` : "no changes"}
      </p>
      <pre>
        {lines.map((l, i) => (
          <div key={i} className={`diff-${l.kind}`}>
            {l.kind === "add" ? "+ " : l.kind === "del" ? "- " : "  "}
            {l.text}
          </div>
        ))}
      </pre>
    </section>
  );
}
