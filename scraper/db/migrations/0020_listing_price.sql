-- 20: each listed template's price and purchase URL as last walked (issue 28), so that a template
-- fetched after the walk that listed it gets them in the same transaction as its row

    ALTER TABLE listing ADD COLUMN price REAL;
    ALTER TABLE listing ADD COLUMN purchase_url TEXT;
