// CodeMirror 6 with YAML highlighting; problems found by the server are shown as
// diagnostics on their line.
import { yaml } from "@codemirror/lang-yaml";
import { lintGutter, setDiagnostics, type Diagnostic } from "@codemirror/lint";
import { EditorState } from "@codemirror/state";
import { EditorView } from "@codemirror/view";
import { basicSetup } from "codemirror";
import { useEffect, useEffectEvent, useRef } from "react";

export interface Problem {
  message: string;
  /** 1-based line, when known. */
  line?: number;
  /** The task it is about, when known. */
  task?: string;
}

export function YamlEditor({
  value,
  onChange,
  problem,
}: {
  value: string;
  onChange: (text: string) => void;
  problem: Problem | null;
}) {
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | null>(null);
  // The latest onChange, for the editor's listener (made once, with the editor).
  const changed = useEffectEvent(onChange);

  useEffect(() => {
    const v = new EditorView({
      parent: host.current!,
      state: EditorState.create({
        doc: value,
        extensions: [
          basicSetup,
          yaml(),
          lintGutter(),
          EditorView.contentAttributes.of({ "aria-label": "Workflow YAML" }),
          EditorView.updateListener.of((u) => {
            if (u.docChanged) changed(u.state.doc.toString());
          }),
        ],
      }),
    });
    view.current = v;
    return () => v.destroy();
    // The editor owns its text after creation; `value` only seeds it.
  }, []); // eslint-disable-line react-hooks/exhaustive-deps

  // A new seed (the stored definition arrived) replaces the text once.
  useEffect(() => {
    const v = view.current;
    if (v && v.state.doc.toString() !== value)
      v.dispatch({ changes: { from: 0, to: v.state.doc.length, insert: value } });
  }, [value]);

  useEffect(() => {
    const v = view.current;
    if (!v) return;
    const diagnostics: Diagnostic[] = [];
    if (problem) {
      const n = Math.min(Math.max(problem.line ?? 1, 1), v.state.doc.lines);
      const line = v.state.doc.line(n);
      diagnostics.push({ from: line.from, to: line.to, severity: "error", message: problem.message });
    }
    v.dispatch(setDiagnostics(v.state, diagnostics));
  }, [problem]);

  return <div ref={host} className="editor" />;
}
