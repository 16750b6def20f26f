import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { integerIn, matching, nonEmptyList, unique } from "../config-checks";

export interface ImageRegistryArgs {
  /** Repository prefix, e.g. cgs-prod -> cgs-prod/gateway. */
  prefix: string;
  deployables: string[];
  /** Images kept per repository; older ones expire. */
  keepImages: number;
  tags: Record<string, string>;
}

/** One ECR repository per deployable: immutable tags, scan on push, bounded history. */
export class ImageRegistry extends pulumi.ComponentResource {
  /** Registry host, e.g. 123456789012.dkr.ecr.eu-west-1.amazonaws.com. */
  readonly registry: pulumi.Output<string>;
  readonly repositoryUrls: Record<string, pulumi.Output<string>>;

  constructor(name: string, args: ImageRegistryArgs, opts?: pulumi.ComponentResourceOptions) {
    super("cgs:infra:ImageRegistry", name, {}, opts);
    const repositoryName = /^[a-z0-9]+([._-][a-z0-9]+)*$/;
    matching("image repository prefix", args.prefix, repositoryName, "a lowercase ECR name");
    for (const d of nonEmptyList<string>("deployables", args.deployables)) {
      matching("deployable", d, repositoryName, "a lowercase ECR name");
    }
    unique("deployables", args.deployables);
    integerIn("keepImages", args.keepImages, 1, 10_000);
    const lifecycle = JSON.stringify({
      rules: [
        {
          rulePriority: 1,
          description: `keep the last ${args.keepImages} images`,
          selection: { tagStatus: "any", countType: "imageCountMoreThan", countNumber: args.keepImages },
          action: { type: "expire" },
        },
      ],
    });
    this.repositoryUrls = {};
    for (const d of args.deployables) {
      const repo = new aws.ecr.Repository(
        `${name}-${d}`,
        {
          name: `${args.prefix}/${d}`,
          imageTagMutability: "IMMUTABLE",
          imageScanningConfiguration: { scanOnPush: true },
          encryptionConfigurations: [{ encryptionType: "AES256" }],
          tags: args.tags,
        },
        { parent: this },
      );
      new aws.ecr.LifecyclePolicy(
        `${name}-${d}`,
        { repository: repo.name, policy: lifecycle },
        { parent: this },
      );
      this.repositoryUrls[d] = repo.repositoryUrl;
    }
    const first = Object.values(this.repositoryUrls)[0];
    this.registry = first ? first.apply((url) => url.split("/")[0] as string) : pulumi.output("");
    this.registerOutputs({ registry: this.registry, repositoryUrls: this.repositoryUrls });
  }
}
