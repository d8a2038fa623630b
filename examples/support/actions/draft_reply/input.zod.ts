import { z } from "npm:zod";

export default z.object({
  situation: z.string().describe("What happened, in a sentence or two"),
  customerName: z.string().optional(),
  mood: z.enum(["calm", "upset", "angry"]).default("upset"),
});
