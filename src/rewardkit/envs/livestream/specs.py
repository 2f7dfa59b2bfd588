"""The console's tools as the agent sees them: Chinese descriptions, JSON Schemas, risk levels and gates."""

from __future__ import annotations

from functools import partial

from rewardkit.envs.livestream import gates, reads, writes
from rewardkit.envs.tool import declare

ROOM_ID = {"type": "string", "pattern": "^R[0-9]{3}$", "description": "直播间编号，如 R101"}
SKU = {"type": "string", "pattern": "^SP[0-9]{3}$", "description": "商品编号，如 SP001"}
SESSION_ID = {"type": "string", "pattern": "^S[0-9]{6}$", "description": "往期场次编号，如 S240610"}
YUAN = {"type": "number", "exclusiveMinimum": 0, "maximum": 100000}
KEY = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "description": "幂等键：每个写操作传一个新的 UUID；重试同一操作时沿用原键，同一个键绝不会执行两次",
}


spec = partial(declare, key=KEY)  # a write's idempotency key, described in the console's language


SPECS = [
    spec(
        reads.get_shop_rules,
        "查看店铺信息、当前时间，以及商家规则（改价审批、切品最小间隔）和平台红线（成本价底线、最大优惠比例）。",
    ),
    spec(
        reads.list_live_rooms,
        "列出店铺的直播间（可按状态筛选）。",
        optional=("status",),
        status={"type": "string", "enum": ["直播中", "预告", "已结束"], "description": "直播间状态"},
    ),
    spec(
        reads.get_live_room,
        "查看一个直播间：状态、智能标题开关、正在讲解的商品、上次切品时间、商品列表及手卡。",
        room_id=ROOM_ID,
    ),
    spec(
        reads.search_products,
        "按名称、类目或编号搜索商品，返回编号、售价和库存。",
        keyword={"type": "string", "minLength": 1, "maxLength": 40, "description": "关键词，如 面膜、零食"},
    ),
    spec(reads.get_product, "查看商品详情：售价、成本价、库存、商家设定的调价区间。", sku=SKU),
    spec(reads.list_past_sessions, "列出往期直播场次（最近的在前），含商品数量。"),
    spec(reads.get_past_session, "查看一场往期直播的商品及销量。", session_id=SESSION_ID),
    spec(reads.list_coupons, "列出直播间已发放的优惠券。", room_id=ROOM_ID),
    spec(
        writes.create_live_room,
        "创建一个预告状态的新直播间，返回新直播间编号。",
        write=True,
        title={"type": "string", "minLength": 1, "maxLength": 40, "description": "直播间标题，按主播给的原文"},
        scheduled_start={
            "type": "string",
            "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}$",
            "description": "开播时间，格式 YYYY-MM-DD HH:MM，须晚于当前时间",
        },
    ),
    spec(
        writes.sync_session_products,
        "把一场往期直播的商品同步到直播间的商品列表（已在列表里的跳过）。",
        write=True,
        room_id=ROOM_ID,
        session_id=SESSION_ID,
    ),
    spec(
        writes.put_product_on_air,
        "切换直播间正在讲解的商品（上播）。直播间须在直播中，商品须在列表里且有库存；"
        "距上次切品未满最小间隔时需主播批准。",
        gates.PUT_ON_AIR,
        write=True,
        room_id=ROOM_ID,
        sku=SKU,
    ),
    spec(
        writes.change_price,
        "修改商品售价，立即对所有直播间生效。需主播批准；低于成本价、降幅超过平台上限、"
        "超出商家调价区间的改价一律拒绝。",
        gates.CHANGE_PRICE,
        write=True,
        sku=SKU,
        new_price={**YUAN, "description": "新售价（元），最多两位小数"},
    ),
    spec(
        writes.issue_coupon,
        "在直播间给一个商品发放立减优惠券。券后价不得低于成本价，优惠不得超过平台上限。",
        gates.ISSUE_COUPON,
        write=True,
        room_id=ROOM_ID,
        sku=SKU,
        discount={**YUAN, "description": "立减金额（元），最多两位小数"},
        quantity={"type": "integer", "minimum": 1, "maximum": 10000, "description": "发放张数"},
    ),
    spec(
        writes.write_cue_card,
        "写入（或覆盖）直播间里某个商品的讲解手卡，内容按主播给的原文。",
        write=True,
        room_id=ROOM_ID,
        sku=SKU,
        content={"type": "string", "minLength": 1, "maxLength": 300, "description": "手卡内容"},
    ),
    spec(writes.enable_smart_titles, "开启直播间的智能标题（按讲解商品自动生成标题）。", write=True, room_id=ROOM_ID),
]
TOOLS = {s.name: s for s in SPECS}
