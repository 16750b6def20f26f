import { parse } from "yaml";
import { z } from "zod";

/**
 * The AWSTOE component document format (schemaVersion 1.0) as AWS documents it for EC2 Image Builder ("Use the
 * AWSTOE component document framework", "Component manager supported action modules", CreateComponent): the
 * document, its parameters, phases and steps, and the inputs of each action module this repository uses. Any other
 * action is refused, so a misspelt one fails here rather than forty minutes into a build.
 */

/** CreateComponent's `data` holds at most this many characters. */
export const COMPONENT_DATA_MAX_CHARS = 16_000;

const text = z.string().min(1);

const executeBash = z.object({
  action: z.literal("ExecuteBash"),
  inputs: z.object({ commands: z.array(text).min(1) }).strict(),
});

const s3Download = z.object({
  action: z.literal("S3Download"),
  inputs: z
    .array(
      z
        .object({
          source: z
            .string()
            .regex(
              /^(s3:\/\/[^/]+\/.+|\{\{ *[A-Za-z][A-Za-z0-9]* *\}\})$/,
              "must be an s3://bucket/key URI or a {{ Parameter }}",
            ),
          destination: text,
          expectedBucketOwner: z.string().optional(),
          overwrite: z.boolean().optional(),
        })
        .strict(),
    )
    .min(1),
});

const webDownload = z.object({
  action: z.literal("WebDownload"),
  inputs: z
    .array(
      z
        .object({
          source: z.string().regex(/^https?:\/\//, "must be an http(s) URL"),
          destination: text,
          overwrite: z.boolean().optional(),
          checksum: z.string().optional(),
          algorithm: z.enum(["MD5", "SHA1", "SHA256", "SHA512"]).optional(),
        })
        .strict(),
    )
    .min(1),
});

const reboot = z.object({
  action: z.literal("Reboot"),
  inputs: z
    .object({ delaySeconds: z.number().int().min(0).optional() })
    .strict()
    .optional(),
});

const updateOs = z.object({
  action: z.literal("UpdateOS"),
  inputs: z
    .object({ include: z.array(text).optional(), exclude: z.array(text).optional() })
    .strict()
    .optional(),
});

const stepCommon = z.object({
  name: text,
  timeoutSeconds: z
    .number()
    .int()
    .refine((n) => n === -1 || n > 0, "must be a positive number of seconds, or -1 for no timeout")
    .optional(),
  onFailure: z.enum(["Abort", "Continue", "Ignore"]).optional(),
  maxAttempts: z.number().int().min(1).optional(),
});

const step = z.intersection(
  stepCommon,
  z.discriminatedUnion("action", [executeBash, s3Download, webDownload, reboot, updateOs], {
    errorMap: (issue, ctx) =>
      issue.code === "invalid_union_discriminator"
        ? { message: `must be one of ${issue.options.join(", ")}` }
        : { message: ctx.defaultError },
  }),
);

const phase = z.object({
  name: z.enum(["build", "validate", "test"]),
  steps: z.array(step).min(1),
});

const parameter = z.record(
  z.string().regex(/^[A-Za-z][A-Za-z0-9]*$/, "parameter names are letters and digits"),
  z
    .object({ type: z.literal("string"), default: z.string().optional(), description: z.string().optional() })
    .strict(),
);

export const componentDocumentSchema = z
  .object({
    name: z.string().optional(),
    description: z.string().optional(),
    schemaVersion: z.union([z.literal("1.0"), z.literal(1)], {
      errorMap: () => ({ message: "must be 1.0" }),
    }),
    parameters: z
      .array(parameter.refine((p) => Object.keys(p).length === 1, "each entry declares one parameter"))
      .optional(),
    phases: z.array(phase).min(1),
  })
  .strict()
  .superRefine((doc, ctx) => {
    const phases = doc.phases.map((p) => p.name);
    phases.forEach((name, i) => {
      if (phases.indexOf(name) !== i)
        ctx.addIssue({ code: "custom", path: ["phases", i, "name"], message: `phase ${name} appears twice` });
    });
    doc.phases.forEach((p, i) => {
      const names = p.steps.map((s) => s.name);
      names.forEach((name, j) => {
        if (names.indexOf(name) !== j)
          ctx.addIssue({
            code: "custom",
            path: ["phases", i, "steps", j, "name"],
            message: `step ${name} appears twice in phase ${p.name}`,
          });
      });
    });
  });

export type ComponentDocument = z.infer<typeof componentDocumentSchema>;

export interface DocumentCheck {
  document?: ComponentDocument;
  /** Each problem as "<field path>: <message>". */
  problems: string[];
}

/**
 * Parses and checks one component document: the schema, the size CreateComponent accepts, and that every
 * `{{ Parameter }}` it uses is declared and every declared parameter is used (chaining expressions, which name a
 * phase and step with dots, are AWSTOE's own).
 */
export function checkComponentDocument(data: string): DocumentCheck {
  const problems: string[] = [];
  if (data.length > COMPONENT_DATA_MAX_CHARS)
    problems.push(
      `(document): ${data.length} characters, CreateComponent accepts ${COMPONENT_DATA_MAX_CHARS}`,
    );
  let raw: unknown;
  try {
    raw = parse(data);
  } catch (err) {
    return { problems: [...problems, `(document): not YAML: ${(err as Error).message}`] };
  }
  const result = componentDocumentSchema.safeParse(raw);
  if (!result.success) {
    for (const issue of result.error.issues)
      problems.push(`${issue.path.join(".") || "(document)"}: ${issue.message}`);
    return { problems };
  }
  const declared = new Set((result.data.parameters ?? []).flatMap((p) => Object.keys(p)));
  const used = new Set(
    [...data.matchAll(/\{\{\s*([A-Za-z][A-Za-z0-9]*)\s*\}\}/g)].map((m) => m[1] as string),
  );
  for (const name of used)
    if (!declared.has(name)) problems.push(`parameters: {{ ${name} }} is used but not declared`);
  for (const name of declared)
    if (!used.has(name)) problems.push(`parameters: ${name} is declared but never used`);
  return { document: result.data, problems };
}

/** The bash each ExecuteBash step runs, with `{{ Parameter }}` replaced by a plain word (for shellcheck). */
export function bashSteps(doc: ComponentDocument): { name: string; script: string }[] {
  return doc.phases.flatMap((p) =>
    p.steps.flatMap((s) =>
      s.action === "ExecuteBash"
        ? [
            {
              name: `${p.name}.${s.name}`,
              script: ["#!/usr/bin/env bash", ...s.inputs.commands, ""]
                .join("\n")
                .replace(/\{\{\s*([A-Za-z][A-Za-z0-9.]*)\s*\}\}/g, "param_$1"),
            },
          ]
        : [],
    ),
  );
}
