// The project the Workflows page opens with: the last one chosen, else `default`.
const KEY = "shoal.project";

export function currentProject(): string {
  return localStorage.getItem(KEY) || "default";
}

export function rememberProject(p: string) {
  localStorage.setItem(KEY, p);
}
