-- 17: paid templates (issue 28), from the listing: `price` (NULL when free or unknown), `purchase_url`,
-- `paid` (1 when price > 0 or a purchase URL; NULL until a walk lists the id, e.g. seeded by --ids);
-- and `hollow`, 1 when the stored detail answer is the graph's shape only (what paid templates answer)

    ALTER TABLE workflows ADD COLUMN price REAL;
    ALTER TABLE workflows ADD COLUMN purchase_url TEXT;
    ALTER TABLE workflows ADD COLUMN paid INTEGER;
    ALTER TABLE workflows ADD COLUMN hollow INTEGER NOT NULL DEFAULT 0;
