package dev.edgelite.android

import android.content.Context
import android.graphics.Bitmap
import android.graphics.Canvas
import android.graphics.Color
import android.graphics.Paint
import android.graphics.PointF
import android.graphics.Rect
import android.view.MotionEvent
import android.view.View

/** A square drawing pad: white strokes on black, as the default sample's images are. */
class DrawView(context: Context) : View(context) {
    val size = 256
    private val bitmap: Bitmap = Bitmap.createBitmap(size, size, Bitmap.Config.ARGB_8888)
    private val canvas = Canvas(bitmap)
    private val paint = Paint().apply {
        color = Color.WHITE
        strokeWidth = 24f
        style = Paint.Style.STROKE
        strokeCap = Paint.Cap.ROUND
        isAntiAlias = true
    }
    private var last: PointF? = null

    init {
        clear()
    }

    fun clear() {
        canvas.drawColor(Color.BLACK)
        invalidate()
    }

    /** The drawing as gray bytes (0..255), row-major, size x size. */
    fun gray(): IntArray {
        val argb = IntArray(size * size)
        bitmap.getPixels(argb, 0, size, 0, 0, size, size)
        return IntArray(argb.size) { argb[it] shr 8 and 0xff }
    }

    override fun onTouchEvent(event: MotionEvent): Boolean {
        val x = event.x * size / width
        val y = event.y * size / height
        when (event.actionMasked) {
            MotionEvent.ACTION_DOWN -> canvas.drawPoint(x, y, paint)
            MotionEvent.ACTION_MOVE -> last?.let { canvas.drawLine(it.x, it.y, x, y, paint) }
            MotionEvent.ACTION_UP -> performClick()
        }
        last = if (event.actionMasked == MotionEvent.ACTION_UP) null else PointF(x, y)
        invalidate()
        return true
    }

    override fun performClick(): Boolean = super.performClick()

    override fun onMeasure(widthMeasureSpec: Int, heightMeasureSpec: Int) {
        val side = MeasureSpec.getSize(widthMeasureSpec)
        setMeasuredDimension(side, side)
    }

    override fun onDraw(c: Canvas) {
        c.drawBitmap(bitmap, null, Rect(0, 0, width, height), null)
    }
}
