// `npm run lint` (then Prettier's check): typescript-eslint's recommended rules everywhere,
// and React's rules of hooks (with the React Compiler's checks) in the app. Warnings fail
// the lint too.
import js from "@eslint/js";
import reactHooks from "eslint-plugin-react-hooks";
import { defineConfig } from "eslint/config";
import globals from "globals";
import tseslint from "typescript-eslint";

export default defineConfig([
  { ignores: ["dist/", "test-results/", "playwright-report/", "src/api/schema.d.ts"] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    files: ["src/**/*.{ts,tsx}"],
    extends: [reactHooks.configs.flat.recommended],
    languageOptions: { globals: globals.browser },
  },
  {
    files: ["e2e/**", "scripts/**", "*.config.{js,ts}"],
    languageOptions: { globals: globals.node },
  },
]);
