"""Vocabulary and templates for make_examples.py (original, synthetic).

Slots: {time} {time2} {metric} {metric2} {shop} {item} {product} {crowd} {fest} {n} {kw} {kw2} {val} {trend} {cnt};
English templates use the ``_en`` form of the same slot ({time_en}, {metric_en}, ...).
A template step is (intent, tasks or None, depends_on or None); None tasks means [rewrite].
"""

P1_EXPERTS = ["全网搜索专家", "数据分析专家", "策略推荐专家", "图片生成专家", "商家入驻专家"]
P2_EXPERTS = [*P1_EXPERTS, "人群运营专家", "关键词配置专家", "对账结算专家"]
FAKE_EXPERTS = ["营销专家", "客服专家", "财务专家", "文案专家", "选品专家", "数据专家"]

# intent -> (p1 expert, p2 expert). p1 routes the p2-only intents to the closest p1 expert.
EXPERT = {
    "search": ("全网搜索专家", "全网搜索专家"),
    "data": ("数据分析专家", "数据分析专家"),
    "strategy": ("策略推荐专家", "策略推荐专家"),
    "image": ("图片生成专家", "图片生成专家"),
    "onboard": ("商家入驻专家", "商家入驻专家"),
    "crowd": ("策略推荐专家", "人群运营专家"),
    "keyword": ("策略推荐专家", "关键词配置专家"),
    "settle": ("数据分析专家", "对账结算专家"),
}
P2_ONLY = {
    "crowd": ("人群运营", "audience operations"),
    "keyword": ("关键词配置", "keyword setup"),
    "settle": ("对账结算", "billing reconciliation"),
}
INTENT_WEIGHT = {
    "p1": {
        "search": 1.0,
        "data": 1.4,
        "strategy": 1.1,
        "image": 1.0,
        "onboard": 0.8,
        "crowd": 0.35,
        "keyword": 0.25,
        "settle": 0.3,
    },
    "p2": {
        "search": 0.9,
        "data": 1.2,
        "strategy": 1.0,
        "image": 0.9,
        "onboard": 0.7,
        "crowd": 0.9,
        "keyword": 0.7,
        "settle": 0.8,
    },
}

TOOLS = ["经营周报", "流量分析", "券核销报表", "会员洞察", "海报模板", "账单明细", "商品榜单", "评价管理"]
TIMES = [
    ("今天", "today"),
    ("昨天", "yesterday"),
    ("本周", "this week"),
    ("上周", "last week"),
    ("本月", "this month"),
    ("上个月", "last month"),
    ("上上个月", "the month before last"),
    ("近7天", "the last 7 days"),
    ("近30天", "the last 30 days"),
    ("双十一期间", "Double 11"),
    ("国庆期间", "National Day"),
    ("今年一季度", "Q1 this year"),
    ("春节期间", "Spring Festival"),
]
METRICS = [
    ("营收", "revenue", "money"),
    ("客单价", "average order value", "price"),
    ("复购率", "repeat rate", "pct"),
    ("核销率", "redemption rate", "pct"),
    ("访客数", "visitors", "count"),
    ("转化率", "conversion rate", "pct"),
    ("订单量", "order volume", "count"),
    ("新客数", "new customers", "count"),
    ("退款率", "refund rate", "pct"),
    ("毛利", "gross profit", "money"),
]
SHOPS = [
    ("奶茶店", "bubble tea shop"),
    ("水果店", "fruit shop"),
    ("便利店", "convenience store"),
    ("美甲店", "nail salon"),
    ("餐馆", "restaurant"),
    ("咖啡店", "coffee shop"),
    ("烘焙店", "bakery"),
    ("花店", "flower shop"),
    ("面馆", "noodle shop"),
    ("洗衣店", "laundry"),
]
ITEMS = [
    ("招牌奶茶", "signature milk tea"),
    ("新品蛋糕", "the new cake"),
    ("草莓礼盒", "strawberry boxes"),
    ("美甲套餐", "manicure sets"),
    ("午市套餐", "the lunch set"),
    ("冷萃咖啡", "cold brew"),
    ("鲜花花束", "flower bouquets"),
    ("牛肉面", "beef noodles"),
    ("水果拼盘", "fruit platters"),
]
PRODUCTS = [
    ("收钱码", "the QR payment code"),
    ("花呗分期", "Huabei installments"),
    ("商家券", "merchant coupons"),
    ("会员卡", "the membership card"),
    ("扫码点餐", "scan-to-order"),
    ("碰一下", "tap-to-pay"),
    ("芝麻先享", "Zhima pay-later"),
    ("支付宝小程序", "an Alipay mini program"),
]
CROWDS = [
    ("复购人群", "repeat customers"),
    ("新客", "new customers"),
    ("沉睡会员", "dormant members"),
    ("周边3公里用户", "users within 3 km"),
    ("高客单人群", "big spenders"),
    ("学生人群", "students"),
]
FESTS = [
    ("双十一", "Double 11"),
    ("中秋", "Mid-Autumn"),
    ("国庆", "National Day"),
    ("春节", "Spring Festival"),
    ("520", "520"),
    ("店庆", "the shop anniversary"),
]
KWS = [
    ("奶茶", "milk tea"),
    ("水果捞", "fruit bowl"),
    ("鲜花速递", "flower delivery"),
    ("美甲", "manicure"),
    ("早餐", "breakfast"),
    ("咖啡外带", "coffee to go"),
    ("蛋糕定制", "custom cakes"),
]
NS = ["2", "3", "5"]

# (intent, queries, rewrite[, tasks])
SIMPLE_ZH = [
    ("search", ["今日资讯", "看看今天的商家资讯", "今天有什么新闻？"], "查看今日商家资讯"),
    ("search", ["最近{shop}行业有什么新政策？", "搜一下{shop}行业最新政策"], "搜索{shop}行业的最新政策"),
    ("search", ["{product}最近费率有调整吗？", "查一下{product}的最新费率"], "查询{product}的最新费率"),
    ("search", ["附近的{shop}都在搞什么活动？", "看看同行{shop}最近的活动"], "搜索附近{shop}的近期营销活动"),
    ("search", ["{fest}有什么热门营销玩法？", "搜搜{fest}大家都怎么做活动"], "搜索{fest}的热门营销玩法"),
    ("search", ["今年{item}行情怎么样？"], "搜索今年{item}的市场行情"),
    ("data", ["查看经营周报", "看看经营周报", "周报发我看看"], "查看经营周报"),
    (
        "data",
        ["帮我分析一下{time}的{metric}", "{time}的{metric}怎么样？", "看下{time}{metric}"],
        "分析{time}的{metric}",
    ),
    ("data", ["{time}{metric}为什么下降了？", "{time}的{metric}怎么跌了？"], "分析{time}{metric}下降的原因"),
    ("data", ["{item}{time}卖了多少？", "{time}{item}销量如何？"], "统计{time}{item}的销量"),
    ("data", ["{time}哪个商品卖得最好？", "{time}的爆款是哪个？"], "分析{time}销量最高的商品"),
    ("data", ["对比一下{time}和{time2}的{metric}"], "对比{time}和{time2}的{metric}"),
    ("strategy", ["推荐{n}个提升{metric}的策略", "怎么提升{metric}？给{n}个建议"], "推荐{n}个提升{metric}的策略"),
    ("strategy", ["我是{shop}，怎么提高{metric}？", "{shop}怎么把{metric}做上去？"], "为{shop}推荐提升{metric}的策略"),
    ("strategy", ["帮我想{n}个{fest}促销活动", "{fest}搞{n}个什么活动好？"], "策划{n}个{fest}促销活动"),
    ("strategy", ["{item}定价多少合适？", "{item}该怎么定价？"], "为{item}推荐合适的定价"),
    ("strategy", ["{product}怎么用才能多拉新？"], "推荐利用{product}拉新的策略"),
    ("image", ["给{item}做一张主图", "帮我生成{item}的主图"], "为{item}生成一张主图"),
    ("image", ["做一张{fest}活动海报", "生成{fest}海报"], "生成一张{fest}活动海报"),
    ("image", ["设计一张{product}的宣传图"], "设计一张{product}宣传图"),
    ("image", ["帮我的{shop}做个门头招牌图"], "为{shop}生成门头招牌图"),
    ("image", ["给{item}做{n}张不同风格的图"], "为{item}生成{n}张不同风格的图片"),
    ("onboard", ["怎么开通{product}？", "{product}怎么开通"], "如何开通{product}"),
    ("onboard", ["开{product}需要准备什么材料？"], "开通{product}需要准备哪些材料"),
    ("onboard", ["我想开一家{shop}，怎么入驻？", "{shop}怎么入驻支付宝？"], "{shop}如何入驻支付宝"),
    ("onboard", ["入驻审核要多久？"], "入驻审核需要多长时间"),
    ("onboard", ["店铺审核进度怎么查？"], "查询店铺入驻审核进度"),
    ("onboard", ["营业执照过期了怎么更新？"], "如何更新过期的营业执照"),
    ("crowd", ["圈选一批{crowd}", "帮我筛一下{crowd}"], "圈选{crowd}"),
    (
        "crowd",
        ["给{crowd}发一张优惠券", "给{crowd}推一张券"],
        "向{crowd}推送优惠券",
        ["圈选{crowd}", "向{crowd}推送优惠券"],
    ),
    ("crowd", ["怎么唤醒沉睡会员？"], "制定唤醒沉睡会员的运营方案"),
    ("keyword", ["配置一下搜索关键词", "帮我设置店铺搜索词"], "配置店铺的搜索关键词"),
    ("keyword", ["把“{kw}”加到搜索关键词里"], "将“{kw}”添加为店铺搜索关键词"),
    ("keyword", ["“{kw}”这个关键词要不要配？"], "评估是否配置“{kw}”搜索关键词"),
    ("settle", ["{time}账单对不上，帮我核对一下", "核对一下{time}的账单"], "核对{time}的账单差异"),
    ("settle", ["{time}的结算款什么时候到账？"], "查询{time}结算款的到账时间"),
    ("settle", ["{product}的手续费是怎么扣的？"], "核算{product}的手续费扣除明细"),
    ("settle", ["导出{time}的对账单"], "导出{time}的对账单"),
]
SIMPLE_EN = [
    ("search", ["Any merchant news today?"], "Show today's merchant news"),
    ("search", ["Search the latest {shop_en} policies"], "Search the latest policies for the {shop_en} industry"),
    (
        "data",
        ["Analyze {metric_en} for {time_en}", "Check {metric_en} for {time_en}"],
        "Analyze {metric_en} for {time_en}",
    ),
    ("data", ["Show me the weekly report"], "Show the weekly business report"),
    ("data", ["Why did {metric_en} drop {time_en}?"], "Analyze why {metric_en} dropped {time_en}"),
    ("strategy", ["Give me {n} ideas to raise {metric_en}"], "Recommend {n} strategies to raise {metric_en}"),
    ("strategy", ["How should I price {item_en}?"], "Recommend a price for {item_en}"),
    ("image", ["Make a poster for {fest_en}"], "Generate a {fest_en} promotion poster"),
    ("image", ["Create a main image for {item_en}"], "Generate a main image for {item_en}"),
    (
        "onboard",
        ["How do I open a store on the platform?"],
        "How to open a merchant store on the platform",
        ["Explain the merchant onboarding steps"],
    ),
    ("onboard", ["How do I activate {product_en}?"], "How to activate {product_en}"),
    ("crowd", ["Find my {crowd_en}"], "Select the {crowd_en} segment"),
    ("keyword", ["Set up search keywords for my store"], "Configure the store's search keywords"),
    ("keyword", ["Add '{kw_en}' as a search keyword"], "Add '{kw_en}' to the store's search keywords"),
    ("settle", ["My bill for {time_en} doesn't match"], "Reconcile the bill for {time_en}"),
]

# (queries, rewrite, steps)
COMPOUND_ZH = [
    (
        ["帮我分析{time}的{metric}，并推荐{n}个优化策略", "{time}{metric}不太好，分析下再给{n}个建议"],
        "分析{time}的{metric}并推荐{n}个优化策略",
        [("data", ["分析{time}的{metric}"], None), ("strategy", ["基于{metric}分析推荐{n}个优化策略"], [0])],
    ),
    (
        ["给{item}做一张主图，再推送给{crowd}", "做张{item}主图推给{crowd}"],
        "为{item}生成一张主图并推送给{crowd}",
        [("image", ["为{item}生成一张主图"], None), ("crowd", ["圈选{crowd}", "向{crowd}推送{item}主图"], [0])],
    ),
    (
        ["看看同行{fest}都做什么活动，再帮我出{n}个方案"],
        "搜索同行的{fest}活动并据此策划{n}个活动方案",
        [("search", ["搜索同行的{fest}活动"], None), ("strategy", ["参考同行活动策划{n}个{fest}活动方案"], [0])],
    ),
    (
        ["{time}哪个商品卖得最好？给它做张海报"],
        "找出{time}销量最高的商品并为其生成海报",
        [("data", ["分析{time}销量最高的商品"], None), ("image", ["为销量最高的商品生成海报"], [0])],
    ),
    (
        ["分析{time}{metric}，出{n}个策略，再做张活动海报"],
        "分析{time}的{metric}，推荐{n}个策略并生成活动海报",
        [
            ("data", ["分析{time}的{metric}"], None),
            ("strategy", ["基于分析结果推荐{n}个策略"], [0]),
            ("image", ["根据推荐的策略生成活动海报"], [1]),
        ],
    ),
    (
        ["推荐{n}个{fest}活动，再做张海报"],
        "策划{n}个{fest}活动并为其生成海报",
        [("strategy", ["策划{n}个{fest}活动"], None), ("image", ["为{fest}活动生成海报"], [0])],
    ),
    (
        ["核对{time}账单，差额部分分析下原因"],
        "核对{time}的账单并分析差额原因",
        [("settle", ["核对{time}的账单"], None), ("data", ["分析账单差额的原因"], [0])],
    ),
    (
        ["先看看{crowd}的消费情况，再圈出来发券"],
        "分析{crowd}的消费情况并圈选该人群发放优惠券",
        [("data", ["分析{crowd}的消费情况"], None), ("crowd", ["圈选{crowd}", "向{crowd}发放优惠券"], [0])],
    ),
    (
        ["搜一下{shop}的热门搜索词，再配置到店里"],
        "搜索{shop}行业热门搜索词并配置为店铺关键词",
        [("search", ["搜索{shop}行业热门搜索词"], None), ("keyword", ["将热门搜索词配置为店铺关键词"], [0])],
    ),
    (
        ["搜一下{shop}行业动态，再看看我{time}的{metric}"],
        "搜索{shop}行业动态并分析{time}的{metric}",
        [("search", ["搜索{shop}行业动态"], None), ("data", ["分析{time}的{metric}"], None)],
    ),
    (
        ["开通{product}，顺便做张宣传海报"],
        "开通{product}并生成一张宣传海报",
        [("onboard", ["如何开通{product}"], None), ("image", ["生成一张{product}宣传海报"], None)],
    ),
    (
        ["看下{time}的{metric}，再给{item}做张主图"],
        "分析{time}的{metric}并为{item}生成主图",
        [("data", ["分析{time}的{metric}"], None), ("image", ["为{item}生成一张主图"], None)],
    ),
    (
        ["{time}账单核对一下，再看看{metric}"],
        "核对{time}的账单并分析{time}的{metric}",
        [("settle", ["核对{time}的账单"], None), ("data", ["分析{time}的{metric}"], None)],
    ),
    (
        ["配置下搜索词，再做张{fest}海报"],
        "配置店铺搜索关键词并生成{fest}海报",
        [("keyword", ["配置店铺的搜索关键词"], None), ("image", ["生成一张{fest}海报"], None)],
    ),
    (
        ["今日资讯发我，再看下经营周报"],
        "查看今日商家资讯和经营周报",
        [("search", ["查看今日商家资讯"], None), ("data", ["查看经营周报"], None)],
    ),
    (
        ["{product}怎么开通？另外推荐{n}个拉新策略"],
        "如何开通{product}，并推荐{n}个拉新策略",
        [("onboard", ["如何开通{product}"], None), ("strategy", ["推荐{n}个拉新策略"], None)],
    ),
    (
        ["查{product}费率、看{time}{metric}、做张海报"],
        "查询{product}的最新费率，分析{time}的{metric}，并生成一张宣传海报",
        [
            ("search", ["查询{product}的最新费率"], None),
            ("data", ["分析{time}的{metric}"], None),
            ("image", ["生成一张宣传海报"], None),
        ],
    ),
    (
        ["圈一批{crowd}，顺便查查{fest}有什么玩法"],
        "圈选{crowd}并搜索{fest}的热门营销玩法",
        [("crowd", ["圈选{crowd}"], None), ("search", ["搜索{fest}的热门营销玩法"], None)],
    ),
]
COMPOUND_EN = [
    (
        ["Analyze {metric_en} for {time_en} and suggest {n} fixes"],
        "Analyze {metric_en} for {time_en} and recommend {n} strategies",
        [
            ("data", ["Analyze {metric_en} for {time_en}"], None),
            ("strategy", ["Recommend {n} strategies based on the analysis"], [0]),
        ],
    ),
    (
        ["Image for {item_en}, then push it to {crowd_en}"],
        "Generate an image for {item_en} and push it to {crowd_en}",
        [
            ("image", ["Generate an image for {item_en}"], None),
            ("crowd", ["Select {crowd_en}", "Push the image to {crowd_en}"], [0]),
        ],
    ),
    (
        ["Show today's news and the weekly report"],
        "Show today's merchant news and the weekly business report",
        [("search", ["Show today's merchant news"], None), ("data", ["Show the weekly business report"], None)],
    ),
    (
        ["Activate {product_en} and make a poster"],
        "Activate {product_en} and generate a promotion poster",
        [("onboard", ["Explain how to activate {product_en}"], None), ("image", ["Generate a promotion poster"], None)],
    ),
]

# (previous user turn, assistant reply, queries, rewrite, steps)
FOLLOW_ZH = [
    (
        "帮我分析一下{time}的{metric}",
        "好的，{time}{metric}为{val}，{trend}。",
        ["那{time2}呢？", "{time2}的呢？", "换成{time2}看看"],
        "分析{time2}的{metric}",
        [("data", None, None)],
    ),
    (
        "帮我分析一下{time}的{metric}",
        "好的，{time}{metric}为{val}，{trend}。",
        ["{metric2}呢？", "那{metric2}怎么样？"],
        "分析{time}的{metric2}",
        [("data", None, None)],
    ),
    (
        "给{item}做一张主图",
        "已为你生成{item}主图，采用暖色调风格。",
        ["再做一张竖版的", "来张竖版的"],
        "为{item}再生成一张竖版主图",
        [("image", None, None)],
    ),
    (
        "给{item}做一张主图",
        "已为你生成{item}主图，采用暖色调风格。",
        ["换个清新点的风格"],
        "为{item}重新生成一张清新风格的主图",
        [("image", None, None)],
    ),
    (
        "帮我想{n}个本周的促销活动",
        "好的，为你策划了{n}个活动，包括满减和会员日。",
        ["换成周末的", "周末的呢？"],
        "策划{n}个周末的促销活动",
        [("strategy", None, None)],
    ),
    (
        "推荐{n}个提升{metric}的策略",
        "好的：1.推出会员日；2.设置满减券；3.上线套餐组合。",
        ["再多给几个", "还有别的吗？"],
        "再推荐几个提升{metric}的策略",
        [("strategy", None, None)],
    ),
    (
        "帮我分析一下{time}的{metric}",
        "{time}{metric}为{val}，{trend}。",
        ["那针对这个给我出{n}个方案"],
        "根据{time}{metric}的分析结果推荐{n}个优化策略",
        [("strategy", None, None)],
    ),
    (
        "怎么开通{product}？",
        "在商家平台提交资料即可开通{product}，一般1-3个工作日审核。",
        ["需要什么材料？", "要准备哪些材料？"],
        "开通{product}需要准备哪些材料",
        [("onboard", None, None)],
    ),
    (
        "核对一下{time}的账单",
        "已核对{time}账单，发现2笔差异。",
        ["差的那两笔是什么？"],
        "查询{time}账单中两笔差异的明细",
        [("settle", None, None)],
    ),
    (
        "圈选一批{crowd}",
        "已圈选{crowd}共{cnt}人。",
        ["给他们发张券", "给这批人推一张券"],
        "向{crowd}发放优惠券",
        [("crowd", None, None)],
    ),
    (
        "最近{shop}行业有什么新政策？",
        "为你找到3条相关政策。",
        ["第一条具体说说", "展开讲讲第一条"],
        "详细解读{shop}行业最新政策中的第一条",
        [("search", None, None)],
    ),
    (
        "{time}哪个商品卖得最好？",
        "{time}销量最高的是{item}，共售出{cnt}份。",
        ["给它做张主图"],
        "为{item}生成一张主图",
        [("image", None, None)],
    ),
    (
        "{time}哪个商品卖得最好？",
        "{time}销量最高的是{item}，共售出{cnt}份。",
        ["给它做张海报，再推给{crowd}"],
        "为{item}生成海报并推送给{crowd}",
        [("image", ["为{item}生成海报"], None), ("crowd", ["圈选{crowd}", "向{crowd}推送{item}海报"], [0])],
    ),
    (
        "配置一下搜索关键词",
        "已为你配置关键词：{kw}。",
        ["再加一个“{kw2}”"],
        "将“{kw2}”添加为店铺搜索关键词",
        [("keyword", None, None)],
    ),
    (
        "{time}的{metric}怎么样？",
        "{time}{metric}为{val}，{trend}。",
        ["和{time2}比呢？", "跟{time2}对比一下"],
        "对比{time}和{time2}的{metric}",
        [("data", None, None)],
    ),
    (
        "搜搜{fest}大家都怎么做活动",
        "为你找到几种热门玩法：拼团、满减和限时折扣。",
        ["哪个适合我的{shop}？"],
        "为{shop}推荐适合的{fest}营销玩法",
        [("strategy", None, None)],
    ),
    (
        "做一张{fest}活动海报",
        "已生成{fest}活动海报。",
        ["把它推给{crowd}", "发给{crowd}看看"],
        "将{fest}活动海报推送给{crowd}",
        [("crowd", ["圈选{crowd}", "向{crowd}推送{fest}活动海报"], None)],
    ),
]
FOLLOW_EN = [
    (
        "Analyze {metric_en} for {time_en}",
        "Sure, {metric_en} for {time_en} was {val_en}, {trend_en}.",
        ["What about {time2_en}?", "And {time2_en}?"],
        "Analyze {metric_en} for {time2_en}",
        [("data", None, None)],
    ),
    (
        "Make a main image for {item_en}",
        "Done, here is the main image for {item_en}.",
        ["Make a vertical one too"],
        "Generate another vertical main image for {item_en}",
        [("image", None, None)],
    ),
    (
        "Give me {n} ideas to raise {metric_en}",
        "Sure: member days, bundle deals and spend-and-save coupons.",
        ["Any more?", "Got any others?"],
        "Recommend more strategies to raise {metric_en}",
        [("strategy", None, None)],
    ),
    (
        "Check {metric_en} for {time_en}",
        "Sure, {metric_en} for {time_en} was {val_en}, {trend_en}.",
        ["Compare it with {time2_en}"],
        "Compare {metric_en} for {time_en} and {time2_en}",
        [("data", None, None)],
    ),
    (
        "Make a poster for {fest_en}",
        "Done, the {fest_en} poster is ready.",
        ["Push it to {crowd_en}"],
        "Push the {fest_en} poster to {crowd_en}",
        [("crowd", ["Select {crowd_en}", "Push the {fest_en} poster to {crowd_en}"], None)],
    ),
]

REPLY_ZH = {
    "search": "为你找到以下相关信息。",
    "data": "分析完成，数据已整理成报表。",
    "strategy": "为你整理了几条建议。",
    "image": "图片已生成，请查看。",
    "onboard": "按页面提示提交资料即可，审核一般需要1-3个工作日。",
    "crowd": "已完成人群圈选。",
    "keyword": "关键词已配置完成。",
    "settle": "已为你查询账单相关信息。",
}
REPLY_EN = {
    "search": "Here is what I found.",
    "data": "Done, the report is ready.",
    "strategy": "Here are a few suggestions.",
    "image": "The image is ready.",
    "onboard": "Submit the documents on the page; review takes 1-3 working days.",
    "crowd": "The segment is ready.",
    "keyword": "Keywords configured.",
    "settle": "Here are the billing details.",
}

# Think phrasing, per language. {e} expert, {g} gist of the rewrite, {q} query, {k} step count, {task} a task.
THINK = {
    "zh": {
        "follow": "用户说“{q}”，结合上一轮对话，指的是{g}。",
        "single_follow": ["这属于{e}的职责。", "应该交给{e}处理。"],
        "single": ["用户想{g}，这属于{e}的职责。", "用户的需求是{g}，应该交给{e}。", "这个问题是要{g}，由{e}负责。"],
        "single_tail": ["问题很明确，不需要拆解。", "只有一个子任务，直接分配即可。", "不需要拆成多步。"],
        "multi": ["用户的问题包含{k}个子任务。", "这个请求可以拆成{k}步。"],
        "step": "“{task}”交给{e}",
        "step_sep": "，",
        "step_end": "。",
        "fallback": "可用专家里没有专门负责{desc}的，{e}最接近。",
        "dep": "第{j}步要用到第{i}步的结果，所以依赖第{i}步。",
        "indep": "这些子任务互不依赖，可以并行处理。",
        "sep": "",
        # a rambling teacher's re-checks ("verbose" good records and "too_long" defects)
        "recheck": [
            "再确认一遍：{e}负责的是“{task}”，分配没有问题。",
            "等一下，用户说的“{q}”会不会还有别的意思？再看看上下文，应该没有其他含义。",
            "我再核对一下可用专家列表：{experts}。选中的专家都在列表里。",
            "有没有可能需要拆成更多步骤？仔细想想，目前的拆分已经覆盖了用户的全部需求。",
            "补全后的问题是“{rw}”，读起来完整、独立，不依赖上下文。",
            "再确认一遍时间范围和指标有没有遗漏，看起来都已经写进去了。",
            "嗯，还是再检查一次处理问题的表述，应该足够具体，专家可以直接执行。",
            "如果换成别的专家会不会更合适？对比了一下职责，还是{e}最匹配。",
        ],
    },
    "en": {
        "follow": 'The user says "{q}"; from the last turn this means: {g}.',
        "single_follow": ["This is a job for {e}.", "{e} should handle it."],
        "single": ["The user wants to {g}. This belongs to {e}.", "The request is to {g}, which {e} handles."],
        "single_tail": ["It is clear, no need to split it.", "One sub-task is enough."],
        "multi": ["There are {k} sub-tasks.", "This splits into {k} steps."],
        "step": '"{task}" goes to {e}.',
        "step_sep": " ",
        "step_end": "",
        "fallback": "No {desc} expert is listed; {e} fits best.",
        "dep": "Step {j} needs the result of step {i}, so it depends on it.",
        "indep": "They are independent and can run in parallel.",
        "sep": " ",
        "recheck": [
            'Let me double-check: {e} handles "{task}", so that assignment is fine.',
            'Wait, could "{q}" mean something else? Looking at the context again, probably not.',
            "Checking the expert list again: {experts}. The chosen experts are all in it.",
            "Should this be split into more steps? Thinking it over, the current plan covers everything.",
            'The rewritten question is "{rw}"; it reads as a complete, standalone question.',
            "Would another expert fit better? Comparing the roles again, {e} is still the best match.",
        ],
    },
}
SLOT_POOLS = {
    "time": TIMES,
    "shop": SHOPS,
    "item": ITEMS,
    "product": PRODUCTS,
    "crowd": CROWDS,
    "fest": FESTS,
    "kw": KWS,
}
