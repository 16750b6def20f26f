import Ajv, { type ValidateFunction } from "ajv";
import addFormats from "ajv-formats";
import { loadOpenApiDocument, type OpenApiDocument } from "../openapi";

interface ResponseObject {
  $ref?: string;
  content?: Record<string, { schema?: unknown }>;
}

export interface ContractChecker {
  /** Throws with the schema errors unless `body` is what openapi.json documents for this operation and status. */
  assertResponse(method: string, path: string, status: number, body: unknown): void;
}

/**
 * Checks response bodies against openapi.json (jest helper). `path` is the documented template,
 * e.g. "/api/v1/settings"; components are resolved by reference, OpenAPI's `nullable` is honoured.
 */
export function createContractChecker(doc: OpenApiDocument = loadOpenApiDocument()): ContractChecker {
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema({ components: doc.components ?? {} }, "openapi");
  const compiled = new Map<string, ValidateFunction>();

  const resolveResponse = (response: ResponseObject | undefined): ResponseObject | undefined => {
    if (!response?.$ref) return response;
    const name = response.$ref.replace("#/components/responses/", "");
    return (doc.components?.responses as Record<string, ResponseObject> | undefined)?.[name];
  };

  const rewriteRefs = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(rewriteRefs);
    if (node && typeof node === "object") {
      return Object.fromEntries(
        Object.entries(node).map(([k, v]) => [
          k,
          k === "$ref" && typeof v === "string" && v.startsWith("#/") ? `openapi${v}` : rewriteRefs(v),
        ]),
      );
    }
    return node;
  };

  return {
    assertResponse(method, path, status, body) {
      const op = doc.paths[path]?.[method.toLowerCase() as "get"];
      if (!op) throw new Error(`${method} ${path} is not documented`);
      const response = resolveResponse(op.responses[String(status)] as ResponseObject | undefined);
      if (!response) throw new Error(`${method} ${path} does not document status ${status}`);
      const schema = response.content?.["application/json"]?.schema;
      if (schema === undefined) {
        if (
          body !== undefined &&
          body !== "" &&
          !(typeof body === "object" && body && !Object.keys(body).length)
        )
          throw new Error(`${method} ${path} ${status} documents no body`);
        return;
      }
      const key = `${method} ${path} ${status}`;
      let validate = compiled.get(key);
      if (!validate) {
        validate = ajv.compile(rewriteRefs(schema) as object);
        compiled.set(key, validate);
      }
      if (!validate(body)) {
        throw new Error(
          `${key}: body does not match the contract: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(body)}`,
        );
      }
    },
  };
}
