-- A live-stream merchant console, as a spec: the tables every simulated tool reads and writes.
CREATE TABLE products (sku TEXT PRIMARY KEY, name TEXT NOT NULL, price REAL NOT NULL CHECK (price > 0),
                       stock INTEGER NOT NULL CHECK (stock >= 0));
CREATE TABLE rooms (room_id TEXT PRIMARY KEY, title TEXT NOT NULL,
                    status TEXT NOT NULL CHECK (status IN ('直播中', '预告', '已结束')),
                    on_air_sku TEXT REFERENCES products(sku));
CREATE TABLE coupons (coupon_id TEXT PRIMARY KEY, room_id TEXT NOT NULL REFERENCES rooms(room_id),
                      sku TEXT NOT NULL REFERENCES products(sku), discount REAL NOT NULL CHECK (discount > 0),
                      quantity INTEGER NOT NULL CHECK (quantity > 0));
CREATE TABLE cue_cards (room_id TEXT NOT NULL REFERENCES rooms(room_id), sku TEXT NOT NULL REFERENCES products(sku),
                        content TEXT NOT NULL, PRIMARY KEY (room_id, sku));
